package lua

import (
	"math/rand/v2"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// beLog is mcp.backend's "log" option, memcached's per-backend request
// log: each reply a request context gets from the backend is logged as
// mcp.log_req logs it ("watch proxyreqs", detail = tag) when it is an
// error (errors), took longer than deadline, or is picked at random at
// one in rate; rate 1 logs every one. A table that sets none of the
// three logs every reply, as memcached does.
type beLog struct {
	rate     int
	errors   bool
	deadline time.Duration
	tag      string
}

// readBackendLog reads the log option's table.
func readBackendLog(L *glua.LState, v glua.LValue) *beLog {
	t, ok := v.(*glua.LTable)
	if !ok {
		L.RaiseError("backend option log must be a table, not %s", v.Type())
	}
	l := &beLog{}
	if d := t.RawGetString("deadline"); d != glua.LNil {
		n := backendOpt{L: L, name: "log deadline", v: d}.num(-1e9, 1e9)
		if n < 0 {
			L.RaiseError("backend log deadline must be >= 0")
		}
		l.deadline = time.Duration(n) * time.Millisecond
	}
	if r := t.RawGetString("rate"); r != glua.LNil {
		n := backendOpt{L: L, name: "log rate", v: r}.num(-1e9, 1<<31-1)
		if n < 0 {
			L.RaiseError("backend log sample rate must be >= 0")
		}
		l.rate = int(n)
	}
	if e := t.RawGetString("errors"); e != glua.LNil {
		l.errors = backendOpt{L: L, name: "log errors", v: e}.boolean()
	}
	if s := t.RawGetString("tag"); s != glua.LNil {
		l.tag = backendOpt{L: L, name: "log tag", v: s}.str()
	}
	if l.deadline == 0 && !l.errors && l.rate == 0 {
		l.rate = 1
	}
	return l
}

// wants reports whether res is to be logged.
func (l *beLog) wants(res *response) bool {
	switch {
	case l.rate == 1:
		return true
	case l.errors && !res.ok():
		return true
	case l.deadline > 0 && res.elapsed > l.deadline:
		return true
	case l.rate > 0:
		return rand.IntN(l.rate) == 0
	}
	return false
}

// logBackendReply logs res, slot h's reply from a backend with the log
// option, for the client connection rc serves.
func (w *worker) logBackendReply(rc *rctx, h int, res *response) {
	l := res.be.log
	if !l.wants(res) {
		return
	}
	req := rc.slots[h].rq.req
	w.r.logRequest(req, res, l.tag)
	w.r.watchRequest(req, res, l.tag, int(rc.cfd))
}
