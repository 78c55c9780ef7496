package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"shardproxy/observe"
	"shardproxy/proxy"
)

// Observer is what GET /slowlog and GET /tap read: a *proxy.Server. A
// Source without it answers them 501.
type Observer interface {
	Slowlogs(n int) []proxy.PoolSlowlog
	ResetSlowlog(pool string) bool
	Tap() *observe.Tap
}

var _ Observer = (*proxy.Server)(nil)

// slowlogReply is GET /slowlog's JSON.
type slowlogReply struct {
	Pools []slowlogPool `json:"pools"`
}

type slowlogPool struct {
	Pool        string      `json:"pool"`
	ThresholdUS int64       `json:"threshold_us"` // -1: off, 0: every request
	MaxLen      int         `json:"max_len"`
	Entries     []slowEntry `json:"entries"` // newest first
}

// slowEntry is one slowlog entry: the request, where it went, and where
// its time went, in microseconds.
type slowEntry struct {
	ID       int64     `json:"id"`
	Time     time.Time `json:"time"` // when it was read
	US       int64     `json:"us"`   // from read to written
	Command  string    `json:"command"`
	Key      string    `json:"key,omitempty"`
	Keys     int       `json:"keys"`
	Args     string    `json:"args"` // the request as sent, cut at 512 bytes
	Client   string    `json:"client"`
	Name     string    `json:"name,omitempty"` // the client's (Redis's CLIENT SETNAME)
	Backend  string    `json:"backend,omitempty"`
	Calls    int       `json:"calls"`
	Result   string    `json:"result"`
	InUS     int64     `json:"in_us"`
	QueuedUS int64     `json:"queued_us"`
	ServerUS int64     `json:"server_us"`
	OutUS    int64     `json:"out_us"`
}

func slowEntryOf(e *observe.SlowEntry) slowEntry {
	in, queued, server, out := e.Phases()
	return slowEntry{
		ID: e.ID, Time: e.Read, US: e.Total().Microseconds(), Command: e.Command, Key: string(e.Key), Keys: e.Keys,
		Args: string(e.Args), Client: e.Client, Name: e.Name, Backend: e.Backend, Calls: e.Calls, Result: e.Result.String(),
		InUS: in.Microseconds(), QueuedUS: queued.Microseconds(), ServerUS: server.Microseconds(), OutUS: out.Microseconds(),
	}
}

// slowlog writes the pools' slowlogs as JSON: ?pool= one pool, ?n= at
// most n entries of each (default all).
func (h *handlers) slowlog(w http.ResponseWriter, r *http.Request) {
	o, ok := h.src.(Observer)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: "admin: no slowlog"})
		return
	}
	n := -1
	if s := r.URL.Query().Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			writeJSON(w, http.StatusBadRequest, errorReply{Error: "admin: n must be a count"})
			return
		}
		n = v
	}
	writeJSON(w, http.StatusOK, slowlogOf(o.Slowlogs(n), r.URL.Query().Get("pool")))
}

// slowlogOf is the reply for pls, of pool only unless it is "".
func slowlogOf(pls []proxy.PoolSlowlog, pool string) slowlogReply {
	reply := slowlogReply{Pools: []slowlogPool{}}
	for _, pl := range pls {
		if pool != "" && pl.Pool != pool {
			continue
		}
		sp := slowlogPool{Pool: pl.Pool, ThresholdUS: observe.Micros(pl.Threshold), MaxLen: pl.MaxLen, Entries: []slowEntry{}}
		for i := range pl.Entries {
			sp.Entries = append(sp.Entries, slowEntryOf(&pl.Entries[i]))
		}
		reply.Pools = append(reply.Pools, sp)
	}
	return reply
}

// slowlogReset empties the slowlog of ?pool=, or of every pool.
func (h *handlers) slowlogReset(w http.ResponseWriter, r *http.Request) {
	o, ok := h.src.(Observer)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: "admin: no slowlog"})
		return
	}
	pool := r.URL.Query().Get("pool")
	if !o.ResetSlowlog(pool) && pool != "" {
		writeJSON(w, http.StatusNotFound, errorReply{Error: "admin: no pool " + strconv.Quote(pool)})
		return
	}
	writeJSON(w, http.StatusOK, struct {
		OK bool `json:"ok"`
	}{true})
}

// tap streams the requests that pass the query's filter
// (observe.ParseFilter), a line each (observe.Record.AppendLine), until
// the client goes. A client that reads too slowly loses lines; the next
// line it gets after a loss is "skipped=N".
func (h *handlers) tap(w http.ResponseWriter, r *http.Request) {
	o, ok := h.src.(Observer)
	if !ok {
		writeJSON(w, http.StatusNotImplemented, errorReply{Error: "admin: no tap"})
		return
	}
	f, err := observe.ParseFilter(r.URL.Query())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorReply{Error: err.Error()})
		return
	}
	sub, err := o.Tap().Subscribe(f)
	if errors.Is(err, observe.ErrTooManyTaps) {
		writeJSON(w, http.StatusServiceUnavailable, errorReply{Error: err.Error()})
		return
	}
	defer sub.Close()
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a stream: the server's write timeout is for the other endpoints
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	stop := context.AfterFunc(r.Context(), sub.Close) // the client went: wake Next
	defer stop()
	var buf []byte
	for {
		if buf, ok = sub.Next(buf[:0]); !ok {
			return
		}
		if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
			return
		}
	}
}
