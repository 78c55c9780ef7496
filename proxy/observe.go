package proxy

import (
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/observe"
)

// This file fills a request's record (observe.Record) for the views that
// want it: the pool's slowlog, the server's tap, and the latency of each
// command. The session takes two clock readings it needs anyway, one per
// read (session.readAt) and one per written batch of replies; the writer
// adds each request's total to its command's histogram (latencyTally)
// and builds a record only for a request over the pool's slowlog
// threshold or while someone taps.

// latencyTally adds up a batch's request latencies per command and
// bucket, to be added to their pool's histograms once per run of one pool
// rather than once per request (see requestCounts for why).
type latencyTally struct {
	slots [4]latencySlot
	n     int
}

type latencySlot struct {
	h         *backend.Histogram
	name      string
	bucket    int
	count     int64
	sum       int64
	histogram *observe.Commands
}

// observe counts p, written at now, and hands it to the views that want
// it. The writer calls it for each request of a batch before p is reset.
func (t *latencyTally) observe(s *session, p *pending, now time.Time) {
	if p.readAt.IsZero() || p.Req.Part == codec.PartMore || p.Req.Name == "" {
		return // a message of a subscription, or a part of a request
	}
	d := now.Sub(p.readAt)
	pl := p.pool
	t.add(&pl.stats.obs.Commands, p.Req.Name, d)
	if h := pl.stats.obs.Hot.Load(); h != nil {
		h.Add(firstKey(&p.Req), p.ReplyBytes(), now)
	}
	th, on := pl.stats.obs.Slowlog.Threshold()
	slow := on && d >= th
	tapped := pl.srv.tap.On() && pl.srv.tap.Wants(pl.cfg.Name, p.Req.Name, firstKey(&p.Req))
	var tr Tracer
	if b := pl.srv.tracer.Load(); b != nil && b.t.Wants(slow) {
		tr = b.t
	}
	if slow || tapped || tr != nil {
		s.record(p, now, slow, tapped, tr)
	}
}

// Tracer traces a sample of the requests (tracing.Tracer): Wants is asked
// for each request answered (slow: its pool's slowlog keeps it), and
// Export is given the record of each it wanted, after its reply is
// written. Both run on the session's writer and must not block.
type Tracer interface {
	Wants(slow bool) bool
	Export(r *observe.Record)
}

// tracerBox holds the server's Tracer (Server.SetTracer).
type tracerBox struct{ t Tracer }

// SetTracer makes t trace the requests answered from now on; nil stops
// tracing. Safe for concurrent use.
func (s *Server) SetTracer(t Tracer) {
	if t == nil {
		s.tracer.Store(nil)
		return
	}
	s.tracer.Store(&tracerBox{t})
}

// firstKey is req's first key, nil for none.
func firstKey(req *codec.Request) []byte {
	if len(req.Keys) == 0 {
		return nil
	}
	return req.Keys[0]
}

// add counts d for command name of cmds.
func (t *latencyTally) add(cmds *observe.Commands, name string, d time.Duration) {
	b := backend.Bucket(d)
	for i := range t.slots[:t.n] {
		if sl := &t.slots[i]; sl.bucket == b && sl.name == name && sl.histogram == cmds {
			sl.count++
			sl.sum += int64(d)
			return
		}
	}
	if t.n == len(t.slots) {
		t.flush()
	}
	t.slots[t.n] = latencySlot{h: cmds.Histogram(name), name: name, bucket: b, count: 1, sum: int64(d), histogram: cmds}
	t.n++
}

// flush adds the counts to their histograms.
func (t *latencyTally) flush() {
	for i := range t.slots[:t.n] {
		sl := &t.slots[i]
		sl.h.Add(sl.bucket, sl.count, sl.sum)
		*sl = latencySlot{}
	}
	t.n = 0
}

// record builds p's record, written at now, and hands it to the pool's
// slowlog (slow), to the tap (tapped) and to the tracer (tr, if any).
func (s *session) record(p *pending, now time.Time, slow, tapped bool, tr Tracer) {
	pl := p.pool
	r := observe.Record{
		Pool:     pl.cfg.Name,
		Protocol: pl.dialect.Name(),
		Command:  p.Req.Name,
		Keys:     len(p.Req.Keys),
		Client:   s.clientAddr(),
		Read:     p.readAt,
		Written:  now,
	}
	if k := firstKey(&p.Req); k != nil {
		r.Key = k[:min(len(k), observe.MaxKey)]
	}
	r.Args = p.Req.Wire[:min(len(p.Req.Wire), observe.MaxArgs)]
	var slowest time.Duration
	p.EachCall(func(b *backend.Backend, c *backend.Call) {
		r.Calls++
		r.ReplyBytes += int64(len(c.Reply.Raw))
		r.Result = max(r.Result, resultOf(&c.Reply))
		queued, sent, replied := c.Times()
		end := replied
		if end.IsZero() {
			end = now
		}
		if took := end.Sub(queued); r.Calls == 1 || took > slowest {
			slowest = took
			r.Queued, r.Sent, r.Replied = queued, sent, replied
			r.Backend = ""
			if b != nil {
				r.Backend = b.Name()
			}
		}
	})
	if r.Result == observe.ResultOK && pl.lookups != nil {
		if keys, store := pl.lookups.Lookups(&p.Req); !store && keys > 0 {
			r.Result = observe.ResultHit
		}
	}
	if slow {
		r.Name = s.clientName()
		if rd, ok := pl.dialect.(codec.Redactor); ok {
			r.Args = rd.Redact(nil, r.Args)
		}
		pl.stats.obs.Slowlog.Add(&r)
	}
	if tapped {
		pl.srv.tap.Publish(&r)
	}
	if tr != nil {
		tr.Export(&r)
	}
}

// resultOf classifies a backend call's reply; results order by how bad.
func resultOf(r *codec.Reply) observe.Result {
	switch {
	case r.Err != nil:
		return observe.ResultError
	case r.Kind == codec.ReplyMiss:
		return observe.ResultMiss
	case r.Kind == codec.ReplyOK:
		return observe.ResultOK
	}
	return observe.ResultError
}

// clientName is the client's name (CLIENT SETNAME), "" for none. The
// writer's: the parser, which the reader replaces when a reload switches
// the pool (switchPool), is read through the view, as other sessions
// read it.
func (s *session) clientName() string {
	if rp := s.view.parser.Load(); rp != nil {
		if n, ok := (*rp).(codec.ClientNamer); ok {
			return n.ClientName()
		}
	}
	return ""
}

// clientAddr is the client's address, as the views name it.
func (s *session) clientAddr() string {
	if s.addr == "" {
		if a := s.nc.RemoteAddr(); a != nil {
			s.addr = a.String()
		}
	}
	return s.addr
}
