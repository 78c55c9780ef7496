package route

import (
	"sync"

	"shardproxy/backend"
	"shardproxy/codec"
)

// Sub is a request a router makes of another router: a copy of a client's
// request (or one the router wrote), routed through any Router as a
// client's would be, whose reply comes back to Done instead of to a
// session. It is how a router of routers (a migration, a shadow, a
// failover pool) sends to the pools it combines and inspects their
// answers.
//
// Get one with GetSub, fill X.Req (CopyRequest or Parse), route it with
// Send, read the answer in Done with Outcome and AppendReply, and give it
// back with Put once nothing reads it. Done runs on whatever goroutine
// answers (a backend's reader, or the caller's when the router answers at
// once); it must not block.
type Sub struct {
	// X is the exchange routed: X.Req is the request.
	X Exchange
	// Done is called once with the answered Sub.
	Done func(s *Sub)
	// Arg is the caller's own word for the Sub (the request it serves).
	Arg any
}

var subs = sync.Pool{New: func() any {
	s := new(Sub)
	s.X.Init(s)
	return s
}}

// GetSub returns an empty Sub whose Done is done.
func GetSub(done func(*Sub), arg any) *Sub {
	s := subs.Get().(*Sub)
	s.Done, s.Arg = done, arg
	return s
}

// Put gives s back, its replies' buffers released; s must not be used
// after.
func (s *Sub) Put() {
	s.X.ReleaseReplies()
	s.X.Clear()
	s.X.Reset()
	s.X.Batch, s.X.Hint = nil, 0
	s.Done, s.Arg = nil, nil
	subs.Put(s)
}

// Send routes s through r with hint (which socket of a backend carries
// it: requests with the same hint stay in order) and batch (nil: sent at
// once; the session's batch when called from Route on the session's
// goroutine, so that s stays in order with the calls staged before it).
func (s *Sub) Send(r Router, hint uint32, batch *backend.Batch) {
	s.X.Hint = hint
	s.X.Batch = batch
	r.Route(&s.X)
}

// Received implements Owner.
func (s *Sub) Received(*Exchange, int) {}

// Answered implements Owner: s is answered.
func (s *Sub) Answered(*Exchange) { s.Done(s) }

// CopyRequest makes x.Req a copy of src that owns its bytes: the wire,
// then the keys, in x.Req.Buf.
func (x *Exchange) CopyRequest(src *codec.Request) {
	dst := &x.Req
	buf, keys := dst.Buf[:0], dst.Keys[:0]
	*dst = *src
	buf = append(buf, src.Wire...)
	for _, k := range src.Keys {
		buf = append(buf, k...)
	}
	dst.Buf = buf
	dst.Wire = buf[:len(src.Wire):len(src.Wire)]
	off := len(src.Wire)
	for _, k := range src.Keys {
		keys = append(keys, buf[off:off+len(k):off+len(k)])
		off += len(k)
	}
	dst.Keys = keys
}

// Parse makes x.Req the first request of wire, parsed by p; the request
// keeps no reference to wire.
func (x *Exchange) Parse(p codec.RequestParser, wire []byte) error {
	var tmp codec.Request
	if _, err := p.ParseRequest(wire, &tmp); err != nil {
		return err
	}
	keys := x.Req.Keys
	x.Req = codec.Request{Keys: keys}
	x.CopyRequest(&tmp)
	return nil
}

// Outcome says how x was answered: failed when a backend call failed or
// the router answered with an error of its own (Answer: no backend, no
// master, ...), else the reply's kind (ReplyOK for an answer a router
// made with Complete, which it does not classify).
func (x *Exchange) Outcome() (kind codec.ReplyKind, failed bool) {
	switch {
	case len(x.subs) > 0:
		for i := range x.calls {
			if x.calls[i].Reply.Err != nil {
				return codec.ReplyError, true
			}
		}
		return codec.ReplyOK, false
	case x.call.Req != nil:
		r := &x.call.Reply
		if r.Err != nil {
			return codec.ReplyError, true
		}
		return r.Kind, r.Kind >= codec.ReplyError
	case x.routed:
		return codec.ReplyOK, false
	}
	return codec.ReplyError, true
}
