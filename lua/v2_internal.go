package lua

import (
	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/store"
)

// The proxy's own cache (Config.Internal) is what memcached's storage is
// to its proxy: mcp.internal(r) (V1) answers r from it at once, a handle
// of mcp.internal_handler (V2) is a pool whose one backend it is, and a
// command no handler is attached for is served from it, as memcached
// serves such a command from its own storage. A Redis pool has none.

// errNoInternal is what mcp.internal and mcp.internal_handler raise on a
// router without a cache.
const errNoInternal = "the pool has no internal cache (a Redis pool has none)"

// internalBackend is the cache as a pool's backend: a call completes at
// once, on the caller's goroutine, with the cache's reply to the request.
type internalBackend struct {
	cache   *store.Store
	dialect codec.Dialect
}

// reply is the cache's answer to req, framed as a backend's would be.
func (ib *internalBackend) reply(req *codec.Request) codec.Reply {
	raw := ib.cache.Do(nil, req.Wire)
	_, kind, err := ib.dialect.ParseReply(raw, req)
	if err != nil { // cannot happen: the cache answers as memcached does
		return codec.Reply{Err: err}
	}
	return codec.Reply{Raw: raw, Kind: kind}
}

// newInternal returns the internal backend and pool of a router, or nils
// when it has no cache.
func newInternal(cfg *Config) (*beRef, *pool) {
	if cfg.Internal == nil || cfg.Redis {
		return nil, nil
	}
	// host and port as memcached's proxy names it in its log lines
	// (be=internal:0).
	be := &beRef{label: "internal", host: "internal", port: "0",
		internal: &internalBackend{cache: cfg.Internal, dialect: cfg.Dialect}}
	return be, &pool{id: 0, bes: []*beRef{be}}
}

// internalReply is the cache's answer to req; r must have a cache.
func (r *Router) internalReply(req *codec.Request) codec.Reply { return r.internal.internal.reply(req) }

// sendInternal answers c from the cache.
func (be *beRef) sendInternal(c *backend.Call) {
	c.Reply = be.internal.reply(c.Req)
	c.Done(c)
}

// internalCall is mcp.internal(r): r's answer from the proxy's own cache,
// as a response object, without waiting.
func (w *worker) internalCall(L *glua.LState) int {
	rq := checkRequest(L, 1)
	if w.r.internal == nil {
		L.RaiseError("mcp.internal: %s", errNoInternal)
	}
	req := rq.req
	reply := w.r.internalReply(req)
	L.Push(w.responseValue(&response{raw: reply.Raw, kind: reply.Kind, err: reply.Err, errKind: codec.ErrServer,
		hdr: headerOf(req), be: w.r.internal}))
	return 1
}
