package lua

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// logReq is mcp.log_req(r, res, detail).
func (w *worker) logReq(L *glua.LState) int {
	rq, _ := userValue[*request](L.Get(1))
	res, _ := userValue[*response](L.Get(2))
	var req *codec.Request
	if rq != nil {
		req = rq.req
	}
	w.r.logRequest(req, res, L.OptString(3, ""))
	w.r.watchRequest(req, res, L.OptString(3, ""), L.OptInt(4, 0))
	return 0
}

// logReqSample is mcp.log_reqsample(ms, rate, allerrors, r, res, detail):
// log the request when it failed (allerrors), took longer than ms
// milliseconds, or was picked at random at one in rate.
func (w *worker) logReqSample(L *glua.LState) int {
	ms := L.CheckInt(1)
	rate := L.CheckInt(2)
	allErrors := L.ToBool(3)
	rq, _ := userValue[*request](L.Get(4))
	res, _ := userValue[*response](L.Get(5))
	detail := L.OptString(6, "")
	log := false
	switch {
	case allErrors && res != nil && !res.ok():
		log = true
	case ms > 0 && res != nil && res.elapsed > time.Duration(ms)*time.Millisecond:
		log = true
	case rate > 0:
		log = rand.IntN(rate) == 0
	}
	if log {
		var req *codec.Request
		if rq != nil {
			req = rq.req
		}
		w.r.logRequest(req, res, detail)
		w.r.watchRequest(req, res, detail, L.OptInt(7, 0))
	}
	return 0
}

// logRequest writes one request log line (memcached's "watch proxyreqs").
func (r *Router) logRequest(req *codec.Request, res *response, detail string) {
	attrs := make([]slog.Attr, 0, 7)
	if req != nil {
		line := firstLine(req.Wire)
		if len(line) > 256 {
			line = line[:256]
		}
		attrs = append(attrs, slog.String("req", string(line)))
	}
	if res != nil {
		res.parse()
		attrs = append(attrs, slog.Int64("elapsed_us", res.elapsed.Microseconds()),
			slog.Int("code", res.code), slog.Int("status", res.status))
		if res.be != nil {
			addr := "internal" // the proxy's own cache has no socket
			if res.be.b != nil {
				addr = res.be.b.Addr()
			}
			attrs = append(attrs, slog.String("backend", res.be.label), slog.String("addr", addr))
		}
		if res.err != nil {
			attrs = append(attrs, slog.String("err", res.err.Error()))
		}
	}
	if detail != "" {
		attrs = append(attrs, slog.String("detail", detail))
	}
	r.log.LogAttrs(context.Background(), slog.LevelInfo, "lua request", attrs...)
}
