package proxy

import (
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/kind"
	"shardproxy/resp"
)

// This file serves a command for every server (FLUSHALL, FLUSHDB, SCRIPT
// FLUSH, FUNCTION LOAD, CONFIG SET ...) queued inside MULTI, in a pool
// whose router names its servers (everyServer: a sharded pool). Redis
// runs it at EXEC with the rest of the transaction. The proxy queues it
// on the transaction's server like any command, and once that server's
// EXEC reply shows the transaction ran, sends it to every other server on
// connections of the client's own, in the transaction's order; the EXEC
// reply the client gets has, in its place, what the servers answered,
// merged as the command is outside a transaction. A transaction that did
// not run (a nil array after a WATCH conflict, -EXECABORT) runs nothing
// on the other servers. On the other servers the command runs just after
// the transaction, not inside it: nothing of the transaction is there to
// see the difference, and their other clients may see it run a moment
// later than on the transaction's server.

// everyServer is implemented by a router whose requests for every server
// go to a fixed list: the pool's servers (shard).
type everyServer interface {
	EveryServer() ([]*backend.Backend, []byte)
}

// everyCmd is a command for every server queued inside MULTI: its place
// among the transaction's replies, and the request, copied.
type everyCmd struct {
	at  int
	req codec.Request
}

// queueEvery notes p, a command for every server inside MULTI, for the
// other servers at EXEC, or returns why it may not be queued: in a pool
// whose router does not name its servers, a command the proxy has a part
// in (CLIENT PAUSE, INFO), or past maxHeldBytes of them.
func (s *session) queueEvery(p *pending) string {
	if _, ok := s.p.router.(everyServer); !ok || p.Req.Pause != codec.PauseNone || p.Req.WithLocal {
		return commandName(p) + " inside a transaction is not supported by shardproxy: it needs every server"
	}
	if s.pin.everySize += len(p.Req.Wire); s.pin.everySize > maxHeldBytes {
		return "too many commands for every server queued in the transaction"
	}
	req := p.Req
	req.Wire = append([]byte(nil), p.Req.Wire...)
	req.Buf, req.Keys = req.Wire, nil
	s.pin.every = append(s.pin.every, everyCmd{at: s.pin.queued, req: req})
	return ""
}

// execEvery serves the EXEC of a transaction that queued commands for
// every server: connections of the client's own to the other servers,
// then EXEC on the transaction's connection, whose reply sends the rest
// (everyRun). No free connection discards the transaction, answering the
// refusal.
func (s *session) execEvery(p *pending, dd kind.Dedicator) {
	pin := s.pin
	if !s.admit(p, 0) { // answered, as sendPinned's
		pin.abort = true
		return
	}
	es, ok := dd.(everyServer)
	if !ok { // a reload made the pool another kind since the transaction began
		s.abortPinWith(p, replyExecAbort)
		return
	}
	all, refusal := es.EveryServer()
	var others []*backend.Dedicated
	for _, b := range all {
		if refusal != nil {
			break
		}
		if b == pin.d.Backend() {
			continue
		}
		var d *backend.Dedicated
		if d, refusal = pin.dp.Take(b, pin.proto, s.p.dialect); refusal == nil {
			others = append(others, d)
		}
	}
	if refusal != nil {
		for _, d := range others {
			pin.dp.Give(d, true)
		}
		s.abortPinWith(p, string(refusal))
		return
	}
	run := &everyRun{p: p, dialect: s.p.dialect, dp: pin.dp, d: pin.d, reuse: pin.reusable(),
		queued: pin.queued, every: pin.every, others: others}
	s.dropPin(pin)
	s.unpinned = true
	pin.d.Stage(&backend.Call{Req: &p.Req, Done: run.exec}, &s.batch)
}

// everyRun is one EXEC of a transaction with commands for every server,
// from its EXEC reply on: the backends' reader goroutines run it, one
// at a time (the EXEC's, then each other server's last reply's).
type everyRun struct {
	p       *pending
	dialect codec.Dialect
	dp      *kind.DedicatedPool
	d       *backend.Dedicated // the transaction's
	reuse   bool
	queued  int // the commands of the transaction: EXEC's replies
	every   []everyCmd
	others  []*backend.Dedicated

	reply   []byte   // EXEC's
	elems   [][]byte // its replies, slices of reply
	mu      sync.Mutex
	replies [][]codec.Reply // per every command, each other server's reply
	bad     []bool          // per other server: a call failed, its connection is not kept
	left    atomic.Int32
}

// exec takes the transaction's EXEC reply and, when it ran, sends the
// commands for every server to the others; else answers that reply.
func (r *everyRun) exec(c *backend.Call) {
	r.reply = append([]byte(nil), c.Reply.Raw...)
	err := c.Reply.Err
	r.dp.Give(r.d, r.reuse && err == nil)
	c.Release()
	elems, ran := resp.ReadElements(r.reply)
	switch {
	case err != nil:
		r.finish(r.dialect.AppendError(nil, codec.ErrServer, err.Error()))
		return
	case !ran: // a nil array, -EXECABORT ...: nothing ran
		r.finish(r.reply)
		return
	case len(elems) != r.queued:
		r.finish(r.dialect.AppendError(nil, codec.ErrServer, "server "+r.d.Backend().Name()+" ran the transaction, "+
			"but its EXEC has "+strconv.Itoa(len(elems))+" replies, not "+strconv.Itoa(r.queued)+
			": its commands for every server were not sent to the others"))
		return
	case len(r.others) == 0:
		r.finish(r.reply)
		return
	}
	r.elems = elems
	r.replies = make([][]codec.Reply, len(r.every))
	for i := range r.replies {
		r.replies[i] = make([]codec.Reply, len(r.others))
	}
	r.bad = make([]bool, len(r.others))
	r.left.Store(int32(len(r.every) * len(r.others)))
	for j, d := range r.others {
		for i := range r.every {
			d.Send(&backend.Call{Req: &r.every[i].req, Done: func(c *backend.Call) { r.other(i, j, c) }})
		}
	}
}

// other keeps the i-th command's reply from the j-th other server, and
// answers the EXEC with the last.
func (r *everyRun) other(i, j int, c *backend.Call) {
	rp := codec.Reply{Raw: append([]byte(nil), c.Reply.Raw...), Kind: c.Reply.Kind, Err: c.Reply.Err,
		Server: r.others[j].Backend().Name()}
	c.Release()
	r.mu.Lock()
	r.replies[i][j] = rp
	if rp.Err != nil {
		r.bad[j] = true
	}
	r.mu.Unlock()
	if r.left.Add(-1) == 0 {
		r.finish(r.merged())
	}
}

// merged is the EXEC reply with each command for every server's reply
// merged over the servers.
func (r *everyRun) merged() []byte {
	out := append([]byte("*"), strconv.Itoa(len(r.elems))...)
	out = append(out, "\r\n"...)
	k := 0
	for at, el := range r.elems {
		if k >= len(r.every) || r.every[k].at != at {
			out = append(out, el...)
			continue
		}
		e := &r.every[k]
		_, kind, _ := r.dialect.ParseReply(el, &e.req) // as the other servers' replies were classified
		replies := append([]codec.Reply{{Raw: el, Kind: kind, Server: r.d.Backend().Name()}}, r.replies[k]...)
		subs := make([]*codec.Request, len(replies))
		for i := range subs {
			subs[i] = &e.req
		}
		out = r.dialect.Merge(out, &e.req, subs, nil, replies)
		k++
	}
	return out
}

// finish answers the EXEC with out and gives the other servers'
// connections back.
func (r *everyRun) finish(out []byte) {
	for j, d := range r.others {
		r.dp.Give(d, r.bad == nil || !r.bad[j])
	}
	r.p.Complete(out)
}
