package lua

import (
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/route"
)

// A direct handler (direct_v1.go, direct_v2.go) needs the Lua state only to
// read which pool it sends to, and that can only change while Lua code
// runs, or, for a V2 handler, when a request context is freed (the next
// request may then take another context of its generator, whose handler
// may differ). So each worker counts both (luaGen), and when a request of
// a memcache command is routed directly under the state's lock, the pool
// it found is remembered for that command with the count. A later request
// of the command finds it there, and while the count has not moved and no
// request is queued for the state, it is sent without taking the state at
// all, and its reply goes to the client from the backend's goroutine.
// Anything else - a change, a multi-key request or a part of a long get
// line, a V2 router (which picks a generator by key), a Redis pool -
// takes the locked way.

// fastEntry is a command's direct pool as of Lua run gen.
type fastEntry struct {
	gen  uint64
	pool *pool
}

// fastTable holds a worker's remembered direct pools, by CMD number.
type fastTable [cmdSize]atomic.Pointer[fastEntry]

// remember notes, under the state's lock, that req's command is routed to
// p directly as of now.
func (w *worker) remember(req *codec.Request, p *pool) {
	if w.r.cfg.Redis {
		return
	}
	n := mcCommandNumber(req.Name)
	if n <= 0 {
		return
	}
	gen := w.luaGen.Load()
	if e := w.fast[n].Load(); e != nil && e.gen == gen && e.pool == p {
		return
	}
	w.fast[n].Store(&fastEntry{gen: gen, pool: p})
}

// fastPool returns the remembered direct pool for req, or nil.
func (w *worker) fastPool(req *codec.Request) *pool {
	if w.r.cfg.Redis || req.Route != codec.RouteKey || len(req.Keys) == 0 || req.Part != codec.PartWhole {
		return nil
	}
	n := mcCommandNumber(req.Name)
	if n <= 0 {
		return nil
	}
	e := w.fast[n].Load()
	if e == nil || e.gen != w.luaGen.Load() {
		return nil
	}
	return e.pool
}

// fastCall is a request routed without the Lua state: the call, and what
// the reply needs.
type fastCall struct {
	call  backend.Call
	r     *Router
	be    *beRef
	req   *codec.Request
	c     Completion
	x     *route.Exchange // c, when it is the Exchange of req: it takes the reply
	bytes int64
	out   []byte
}

var fastCalls sync.Pool // of *fastCall

func newFastCall() *fastCall {
	if fc, ok := fastCalls.Get().(*fastCall); ok {
		return fc
	}
	fc := &fastCall{}
	fc.call.Done = fc.done
	return fc
}

// routeFast sends req straight to its backend if w remembers its command's
// direct pool, and reports whether it did. It does not take the state.
//
// It goes only when no request is queued for w: a queued request counts
// until it has started, so a client's requests reach their backends in
// the client's order, and a get never overtakes a queued set.
func (r *Router) routeFast(w *worker, req *codec.Request, hint uint32, c Completion, bt *backend.Batch) bool {
	if w.queued.Load() > 0 {
		return false
	}
	p := w.fastPool(req)
	if p == nil {
		return false
	}
	be, err := p.pick(keyOf(req, false))
	if err != nil {
		return false // the Lua way reports it
	}
	r.sendFast(be, req, hint, c, int64(len(req.Wire)), bt)
	return true
}

// sendFast sends req to be, or stages it in bt when bt is not nil; its
// reply goes to c from the backend's goroutine, without the state. bytes
// is what Route counted for req in bufferUsed.
func (r *Router) sendFast(be *beRef, req *codec.Request, hint uint32, c Completion, bytes int64, bt *backend.Batch) {
	fc := newFastCall()
	fc.r, fc.be, fc.req, fc.c, fc.bytes = r, be, req, c, bytes
	fc.call.Req = req
	fc.call.MetaRewrite = r.cfg.MetaRewrite != nil
	fc.call.Over = r.overBuffer
	if x, ok := c.(*route.Exchange); ok && req == &x.Req {
		fc.x = x
		x.Forward(&fc.call) // a long value may be spliced: its reply then must go to x.Take
	}
	be.send(&fc.call, hint, bt) // Route counted the request in active and bufferUsed
}

// done answers the client from the backend's goroutine.
func (fc *fastCall) done(*backend.Call) {
	reply := fc.call.Reply
	if fc.x != nil && reply.Err == nil && fc.req.Mode != codec.ModeNoreply {
		fc.take()
		return
	}
	out := fc.r.appendReply(fc.out[:0], fc.req, reply)
	// out is a copy: the reply's buffer goes back to the backend's
	// reader, which would otherwise make a new 64 KiB chunk every few
	// hundred replies and leave the old ones to the garbage collector.
	fc.call.Release()
	r, c, bytes := fc.r, fc.c, fc.bytes
	if cap(out) <= 64<<10 {
		fc.out = out[:0]
	} else {
		fc.out = nil
	}
	fc.reset()
	r.settle(bytes)
	c.Complete(out)
	fastCalls.Put(fc) // after Complete: out is fc.out's storage
}

// take hands the reply to the request's Exchange as it came from the
// backend, the buffer it was read into (or the pipe a long value was
// spliced into) with it: the client's writer writes it as a native pool's
// reply, where appendReply would copy it twice, a big one into new memory.
func (fc *fastCall) take() {
	r, x, bytes := fc.r, fc.x, fc.bytes
	var b *backend.Backend
	if fc.be.internal == nil {
		b = fc.be.b
	}
	r.settle(bytes)
	x.Take(b, &fc.call)
	fc.reset()
	fastCalls.Put(fc)
}

// reset clears fc, whose reply was handed on, for the pool.
func (fc *fastCall) reset() {
	fc.call = backend.Call{Done: fc.call.Done}
	fc.r, fc.be, fc.req, fc.c, fc.x = nil, nil, nil, nil, nil
}

// appendReply appends what the client sees for req when a backend call
// made without Lua returned reply: nothing for a noreply request, the
// failure in the client's words, or the reply.
func (r *Router) appendReply(dst []byte, req *codec.Request, reply codec.Reply) []byte {
	switch {
	case req.Mode == codec.ModeNoreply:
		return dst
	case reply.Err != nil:
		return r.cfg.Dialect.AppendError(dst, codec.ErrServer, r.clientWords(reply.Err).Error())
	}
	return r.cfg.Dialect.AppendReply(dst, req, reply.Raw, reply.Kind)
}
