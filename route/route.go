// Package route is the contract between a client session and whatever
// answers its requests. Every way of answering a pool's requests (a sharded
// pool of servers, Redis Cluster, a Lua route file, and the ones to come)
// is a Router; the session parses a request into an Exchange, hands it to
// its pool's Router, and writes the answer once the Exchange says it is
// ready, in the client's order. The session never asks what kind of
// Router it has.
//
// An Exchange is answered in one of three ways, and exactly once:
//   - Complete: the router made the client's reply itself (a Lua route, a
//     cluster's merged fan-out, an error);
//   - Send: one backend call carries the request, and its reply is passed
//     through (or rewritten by the dialect) when the session writes it;
//   - FanOut: sub-requests go to several backends and the dialect merges
//     their replies when the session writes them.
//
// Reply bytes of Send and FanOut stay in the backend's buffers until the
// session writes them: a big value is written without a copy.
//
// A Router with an event log (the Lua router) is also Watchable: a client's
// watch request (codec.RouteWatch) gets a Watcher of the router's Hub, and
// its session streams the watcher's lines (watch.go).
//
// Concurrency: Route runs on the session's reader goroutine and must not
// block. The answer may come on any goroutine; the Exchange and its
// request stay valid until then, and belong to the session again after.
package route

import (
	"shardproxy/backend"
)

// Router answers the requests of one pool.
type Router interface {
	// Route answers x's request, now or later from another goroutine,
	// through exactly one of x.Complete, x.Answer, x.Send, x.FanOut or
	// x.FanOutAll. It must not block.
	Route(x *Exchange)
	// Stats returns the router's own counters (MOVED replies followed,
	// Lua requests, ...), for the stats command, the stats port and
	// /metrics. Nil when it has none.
	Stats() []Stat
	// Backends returns the backends the router sends to now, for
	// per-server stats. The slice must not be modified.
	Backends() []*backend.Backend
	// Close stops the router. The server calls it once, after a reload
	// replaced the router and its requests in flight were answered (or
	// the drain timeout passed), or at shutdown. It does not close
	// backends: they belong to the backend.Source the router got them
	// from.
	Close()
}

// Completion receives the client's reply to a request a router answered
// with bytes of its own; an Exchange is one. Routers below proxy (lua,
// cluster) take it so that they need not know the Exchange.
type Completion interface {
	// Complete hands over the bytes the client sees; out may be reused
	// after Complete returns. It must not block.
	Complete(out []byte)
}

var _ Completion = (*Exchange)(nil)

// StatKind says how a Stat's value behaves.
type StatKind uint8

const (
	// Counter only grows.
	Counter StatKind = iota
	// Gauge goes up and down.
	Gauge
)

// Stat is one of a router's counters.
type Stat struct {
	// Name is a snake_case name, unique within the router ("moved").
	Name string
	// Help says what it counts, for /metrics.
	Help  string
	Kind  StatKind
	Value int64
}

// BufferLimiter is a Router with a limit on the bytes of the requests in
// flight through it (a Lua pool's mcp.buffer_memory_limit): OverBuffer
// reports whether they are over it now. The session asks when a request's
// command line has come and its value has not (Exchange.Over).
type BufferLimiter interface {
	OverBuffer() bool
}
