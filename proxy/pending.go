package proxy

import (
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
)

// pending is one client request between the session's reader and writer.
// The reader fills it and sends its calls; the backends complete them; the
// writer waits on done and writes the reply.
type pending struct {
	sess    *session
	pool    *pool // the pool that routed it: its dialect words the reply
	counted bool  // in the pool's Active and Buffered counts
	routed  bool  // answered by a router through Complete
	req     codec.Request
	out     []byte      // a reply made by the proxy (local, error, merged)
	ready   atomic.Bool // answered: the writer may write it
	left    atomic.Int32

	call    backend.Call   // the one call of a single-backend request
	calls   []backend.Call // the calls of a fan-out request
	subs    []*codec.Request
	owners  []int              // each key's index in subs, when Split made them
	split   codec.SplitScratch // the storage of subs and owners, when Split made them
	replies []codec.Reply      // the merge's scratch
	doneFn  func(*backend.Call)
}

var pendingPool sync.Pool

func init() { // not in pendingPool's declaration: callDone leads back to it
	pendingPool.New = func() any {
		p := &pending{}
		p.doneFn = p.callDone
		return p
	}
}

func getPending() *pending {
	p := pendingPool.Get().(*pending)
	p.req.Reset()
	p.out = p.out[:0]
	p.ready.Store(false)
	return p
}

func putPending(p *pending) {
	p.sess = nil
	p.pool = nil
	p.routed = false
	p.counted = false
	p.call = backend.Call{}
	clear(p.calls)
	p.calls = p.calls[:0]
	clear(p.subs)
	p.subs = p.subs[:0]
	p.owners = nil
	clear(p.replies)
	p.replies = p.replies[:0]
	p.split.Trim(64 << 10)
	if cap(p.out) > 64<<10 {
		p.out = nil
	}
	if cap(p.req.Buf) > 64<<10 {
		backend.PutBuffer(p.req.Buf)
		p.req.Buf = nil
	}
	if cap(p.req.Keys) > 1024 {
		p.req.Keys = nil
	}
	pendingPool.Put(p)
}

// releaseReplies recycles the backend buffers of p's replies, once they are
// written or copied.
func (p *pending) releaseReplies() {
	p.call.Release()
	for i := range p.calls {
		p.calls[i].Release()
	}
}

// complete marks a pending that needs no backend as ready.
func (p *pending) complete() { p.answered() }

// answered marks p ready and lets its session write what is ready.
func (p *pending) answered() {
	s := p.sess // once ready, p may be written and recycled at any time
	p.ready.Store(true)
	s.flush()
}

// callDone is every call's Done: the last one to finish wakes the writer.
func (p *pending) callDone(c *backend.Call) {
	p.sess.held.Add(int64(len(c.Reply.Raw)))
	if p.counted {
		p.pool.stats.Buffered.Add(int64(len(c.Reply.Raw)))
	}
	if p.left.Add(-1) == 0 {
		p.answered()
	}
}

// Complete implements Completion for requests routed by a router.
func (p *pending) Complete(out []byte) {
	p.out = append(p.out, out...)
	p.routed = true
	p.sess.held.Add(int64(len(out)))
	p.answered()
}

// heldBytes is what callDone and Complete added to the session's held count.
func (p *pending) heldBytes() int64 {
	n := int64(len(p.call.Reply.Raw))
	for i := range p.calls {
		n += int64(len(p.calls[i].Reply.Raw))
	}
	if p.routed {
		n += int64(len(p.out))
	}
	return n
}
