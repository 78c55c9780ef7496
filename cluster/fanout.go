package cluster

import (
	"sync/atomic"

	"shardproxy/codec"
)

// routeMulti splits a multi-key command per slot: Redis Cluster refuses
// keys of different slots in one command even on one node.
func (c *Cluster) routeMulti(req *codec.Request, hint uint32, read bool, done Completer) {
	c.inflight.Add(1)
	targets := make([]int, len(req.Keys))
	same := true
	for i, k := range req.Keys {
		targets[i] = Slot(k)
		same = same && targets[i] == targets[0]
	}
	if same || len(targets) == 0 {
		o := c.newOp(req, -1, hint, read)
		if len(targets) > 0 {
			o.slot = targets[0]
		}
		o.done = done
		o.send()
		return
	}
	subs, slots, owners := c.dialect.Split(req, targets, nil)
	if len(subs) == 0 {
		c.inflight.Add(-1)
		done.Complete(c.dialect.AppendError(nil, codec.ErrServer, "cannot split "+req.Name))
		return
	}
	c.stats.fragments.Add(int64(len(subs)))
	f := &fanout{c: c, req: req, subs: subs, owners: owners, replies: make([]codec.Reply, len(subs)), done: done}
	f.left.Store(int32(len(subs)))
	for i, sub := range subs {
		o := c.newOp(sub, slots[i], hint, read)
		o.parent, o.idx = f, i
		o.send()
	}
}

// routeAll sends req to every master serving slots (FLUSHDB, SCRIPT LOAD)
// and merges their replies.
func (c *Cluster) routeAll(req *codec.Request, hint uint32, done Completer) {
	t := c.tab.Load()
	if t == nil || len(t.masters) == 0 {
		c.Refresh()
		done.Complete(appendClusterDown(nil, c.downReason()))
		return
	}
	c.inflight.Add(1)
	n := len(t.masters)
	f := &fanout{c: c, req: req, subs: make([]*codec.Request, n), replies: make([]codec.Reply, n), done: done, all: true}
	f.left.Store(int32(n))
	for i := range f.subs {
		f.subs[i] = req
	}
	for i, m := range t.masters {
		o := c.newOp(req, -1, hint, false)
		o.fixed, o.parent, o.idx = m, f, i
		o.send()
	}
}

// routeServer sends a SCAN to the master its cursor numbers
// (req.Target; see scanOrder), telling the dialect how many masters the
// walk has (req.Servers). A number past the last master is answered
// codec.ErrNoTarget. Replicas are never scanned, whatever read_from says:
// a cursor is good on the one process that made it, and which replica a
// read goes to may change from one call to the next.
func (c *Cluster) routeServer(req *codec.Request, hint uint32, done Completer) {
	t := c.tab.Load()
	if t == nil || len(t.masters) == 0 {
		c.Refresh()
		done.Complete(appendClusterDown(nil, c.downReason()))
		return
	}
	order := t.scanOrder()
	if req.Target < 0 || req.Target >= len(order) {
		done.Complete(c.dialect.AppendError(nil, codec.ErrClient, codec.ErrNoTarget))
		return
	}
	req.Servers = len(order)
	c.inflight.Add(1)
	o := c.newOp(req, -1, hint, false)
	o.fixed, o.done = order[req.Target], done
	o.send()
}

// fanout collects the replies of a split request.
type fanout struct {
	c       *Cluster
	req     *codec.Request
	subs    []*codec.Request
	owners  []int // each key's index in subs (nil for routeAll)
	replies []codec.Reply
	left    atomic.Int32
	done    Completer
	all     bool // routeAll's: an error reply is logged
}

// reply stores sub-request i's reply; the last one merges and completes.
// An error from one master of a request sent to them all is logged
// naming it: the client sees the error alone, and a change some masters
// made and others did not leaves them different.
func (f *fanout) reply(i int, r codec.Reply) {
	if f.all && r.Kind == codec.ReplyError {
		f.c.log.Info("node refused a request sent to every master", "node", r.Server, "cmd", f.req.Name, "err", firstLine(r.Raw))
	}
	f.replies[i] = r
	if f.left.Add(-1) != 0 {
		return
	}
	f.done.Complete(f.c.dialect.Merge(nil, f.req, f.subs, f.owners, f.replies))
	f.c.inflight.Add(-1)
}
