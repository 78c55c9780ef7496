package proxy

import (
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/resp"
	"shardproxy/route"
)

// pending is one client request between the session's reader and writer.
// The reader fills its Exchange and hands it to the pool's router; the
// router answers it; the writer waits on ready and writes the reply. The
// session is the Exchange's owner (route.Owner).
type pending struct {
	route.Exchange
	sess    *session
	pool    *pool       // the pool that routed it: its dialect words the reply
	counted bool        // in the pool's Active and Buffered counts
	ready   atomic.Bool // answered: the writer may write it
	readAt  time.Time   // when the read that brought it arrived
	// reply is the mode a CLIENT REPLY asks for, applied by the writer
	// in the client's order (reply.go); push marks a frame the proxy
	// pushes (queuePush), which a muted client still gets.
	reply resp.ReplyMode
	push  bool
}

var pendingPool sync.Pool

func init() { // not in pendingPool's declaration: Init leads back to it
	pendingPool.New = func() any {
		p := &pending{}
		p.Init(p)
		return p
	}
}

func getPending() *pending {
	p := pendingPool.Get().(*pending)
	p.prepare()
	return p
}

// prepare readies a recycled pending for a new request.
func (p *pending) prepare() {
	p.Reset()
	p.ready.Store(false)
}

// reset drops what a written pending refers to, so that it can be reused.
func (p *pending) reset() {
	p.sess = nil
	p.pool = nil
	p.counted = false
	p.readAt = time.Time{}
	p.reply, p.push = 0, false
	p.Exchange.Clear()
}

// pendingStock bounds the written pendings a session keeps for its reader
// (see newPending): a client's pipeline of 16 reuses its own. A session
// holds at most twice that many, and gives them back within about finCheck
// once it is quiet (TLS sessions, which have no FIN check, when they end).
const pendingStock = 16

// newPending returns a pending for the reader: one of the session's own
// written ones if it has any, else one from the pool.
//
// A pipelining client's replies are written in batches, usually on another
// core than the reader's. Through the pool, each pending would cost a Put
// there and a Get (often a steal) here. Instead the writer keeps a batch's
// pendings on the session under the lock it holds anyway, and the reader
// takes them all at once. Pendings written one at a time (an unpipelined
// client) go back to the pool, whose per-core cache then serves the reader
// from the core it runs on; the reader only takes the lock when a batch is
// waiting (w.stocked).
func (s *session) newPending() *pending {
	if len(s.free) == 0 && s.w.stocked.Load() {
		s.w.mu.Lock()
		s.free, s.w.freed = s.w.freed, s.free
		s.w.stocked.Store(false)
		s.w.mu.Unlock()
	}
	n := len(s.free)
	if n == 0 {
		return getPending()
	}
	p := s.free[n-1]
	s.free[n-1] = nil
	s.free = s.free[:n-1]
	p.prepare()
	return p
}

// freePending gives back a pending the reader took but did not use.
func (s *session) freePending(p *pending) {
	p.reset()
	if len(s.free) < pendingStock {
		s.free = append(s.free, p)
		return
	}
	pendingPool.Put(p)
}

// stock keeps a written batch's pendings for the reader, up to
// pendingStock; the rest, and a batch of one, go to the pool. w.mu is held.
func (s *session) stock(ps []*pending) {
	k := 0
	if len(ps) > 1 {
		k = min(len(ps), pendingStock-len(s.w.freed))
	}
	if k > 0 {
		if s.w.freed == nil {
			s.w.freed = make([]*pending, 0, pendingStock)
		}
		s.w.freed = append(s.w.freed, ps[:k]...)
		s.w.stocked.Store(true)
	}
	for _, p := range ps[k:] {
		pendingPool.Put(p)
	}
}

// dropStock returns the session's kept pendings to the pool: the session
// has ended, or its FIN check found it quiet (readLoop). Reader only.
func (s *session) dropStock() {
	s.w.mu.Lock()
	freed := s.w.freed
	s.w.freed = nil
	s.w.stocked.Store(false)
	s.w.mu.Unlock()
	for _, ps := range [2][]*pending{s.free, freed} {
		for _, p := range ps {
			pendingPool.Put(p)
		}
	}
	s.free = nil
}

// Answered implements route.Owner: p is ready, and its session writes what
// is ready.
func (p *pending) Answered(*route.Exchange) {
	s := p.sess // once ready, p may be written and recycled at any time
	p.ready.Store(true)
	s.flush()
}

// Received implements route.Owner: reply bytes are held for the client.
func (p *pending) Received(_ *route.Exchange, n int) {
	p.sess.held.Add(int64(n))
	if p.counted {
		p.pool.stats.Buffered.Add(int64(n))
	}
}
