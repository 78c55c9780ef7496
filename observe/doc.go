// Package observe owns the per-request record and the views that read it:
// a pool's slowlog (a bounded ring of the requests over its threshold,
// with where their time went), the tap (a live stream of the requests
// that match a subscriber's filters) and the latency of each command.
//
// The proxy's session fills a Record only when a view wants the request:
// it keeps the times it takes anyway (when the request was read, when its
// reply was handed to the client's socket) and the backend's own stamps
// (backend.Call.Times), compares the total with the pool's threshold and
// asks the Tap whether anyone listens (one atomic load). A Record passed
// to a view is read during the call only; a view that keeps it (the
// slowlog) copies what it keeps.
//
// Everything here is safe for concurrent use. Publishing never blocks: a
// tap subscriber that reads slowly loses lines (route.Watcher's bounded
// buffer) and the drops are counted. observe never imports proxy; it is a
// leaf the proxy and admin read.
package observe
