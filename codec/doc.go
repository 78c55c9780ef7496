// Package codec defines what a wire protocol ("dialect") must provide for the
// proxy to carry it: framing of client requests and backend replies, the
// protocol's own error replies, commands the proxy answers itself, and the
// split/merge hooks for requests that fan out to several backends.
//
// codec owns no I/O and imports only the standard library. Nothing above codec
// switches on a protocol's name: the proxy looks a Dialect up in the registry
// by the name the configuration gives and talks to it through this interface.
//
// Concurrency: a Dialect is stateless and safe for concurrent use. A
// RequestParser belongs to one client session and is not safe for concurrent
// use. A Request is owned by whoever holds it: the session until it hands the
// request to a backend, the backend until it completes the request.
//
// Byte ownership: a Request owns the bytes of Wire and Keys (copied out of the
// client's read buffer by the parser), so they stay valid after the parser's
// input is reused. Reply.Raw is owned by the Reply.
package codec
