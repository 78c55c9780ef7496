package combine

import (
	"sync"
	"sync/atomic"

	"shardproxy/codec"
	"shardproxy/route"
)

// writeOp is one client write through a migrate router: the request to
// the pool that answers (primary) and what the other pool gets (the same
// set or flush, else a delete of the keys), answered once both are in.
//
// What a write's failures mean (docs/migrations.md):
//   - the primary failed: the client gets its error, whatever the other
//     pool did (an unacknowledged write may be anywhere);
//   - the other pool failed a set: its key is deleted there, so it holds
//     no value older than the primary's; the client gets the primary's
//     reply;
//   - the other pool failed a delete (or the delete after a failed set):
//     the client gets an error, so that no acknowledged write leaves an
//     older value in the other pool, which a later phase (or an abort)
//     would read.
type writeOp struct {
	m       *migrate
	plan    *plan // the phase's when the write was routed
	x       *route.Exchange
	c       class
	keys    [][]byte // the guarded keys (nil: every stripe), the primary's storage
	prim    *route.Sub
	other   *route.Sub // nil when the other pool hears nothing
	left    atomic.Int32
	otherOK bool
}

var writeOps = sync.Pool{New: func() any { return new(writeOp) }}

// routeWrite sends a write to the primary, and to the other pool what the
// plan says.
func (m *migrate) routeWrite(x *route.Exchange, c class, p *plan) {
	m.counters.writes.Add(1)
	prim, sec := m.sides(p)
	op := writeOps.Get().(*writeOp)
	*op = writeOp{m: m, plan: p, x: x, c: c}
	op.prim = route.GetSub(op.primDone, nil)
	op.prim.X.CopyRequest(&x.Req)
	if c != flush {
		op.keys = op.prim.X.Req.Keys
	}
	hint := keyHint(x)
	var moved [][]byte
	if p.otherGets && c != flush {
		moved = m.movedKeys(op.prim.X.Req.Keys)
	}
	if p.otherGets && (c == flush || len(moved) > 0) {
		op.other = route.GetSub(op.otherDone, nil)
		if !m.otherRequest(op, c, moved) {
			op.other.Put()
			op.other = nil
			m.counters.writeFailures.Add(1)
			op.prim.Put()
			writeOps.Put(op)
			answerError(x, m.d, "route: cannot write the delete of "+m.name+"'s other pool")
			return
		}
	}
	m.guard.begin(op.keys)
	if op.other == nil {
		op.left.Store(1)
		op.prim.Send(prim, hint, x.Batch)
		return
	}
	op.left.Store(2)
	op.prim.Send(prim, hint, x.Batch)
	op.other.Send(sec, hint, x.Batch)
}

// otherRequest makes op.other's request: the client's for a set or flush
// the plan copies, else a delete of its keys.
func (m *migrate) otherRequest(op *writeOp, c class, moved [][]byte) bool {
	if c == flush && op.plan.otherFlush || c == set && op.plan.otherSets {
		op.other.X.CopyRequest(&op.prim.X.Req)
		return true
	}
	if c == flush {
		return false
	}
	return m.parse(op.other, appendDelete(nil, moved, m.redis)) == nil
}

func (op *writeOp) primDone(*route.Sub) { op.oneDone() }

func (op *writeOp) otherDone(s *route.Sub) {
	_, failed := s.X.Outcome()
	op.otherOK = !failed
	op.oneDone()
}

func (op *writeOp) oneDone() {
	if op.left.Add(-1) == 0 {
		op.settle()
	}
}

// settle answers the client once both pools did their part: a set the
// other pool failed is deleted there first.
func (op *writeOp) settle() {
	m := op.m
	if op.other != nil && !op.otherOK {
		m.counters.otherFailures.Add(1)
		if op.c == set {
			op.other.Put()
			op.other = route.GetSub(op.retryDone, nil)
			if m.parse(op.other, appendDelete(nil, op.prim.X.Req.Keys, m.redis)) == nil {
				_, sec := m.sides(op.plan)
				op.other.Send(sec, keyHint(op.x), nil)
				return
			}
		}
	}
	op.finish()
}

// retryDone is the delete after a failed set's.
func (op *writeOp) retryDone(s *route.Sub) {
	_, failed := s.X.Outcome()
	op.otherOK = !failed
	op.finish()
}

// finish answers the client and lets the keys' stripes go.
func (op *writeOp) finish() {
	m, x := op.m, op.x
	var out []byte
	_, failed := op.prim.X.Outcome()
	if op.other != nil && !op.otherOK && !failed {
		m.counters.writeFailures.Add(1)
		if x.Req.Mode != codec.ModeNoreply {
			out = m.d.AppendError(out, codec.ErrServer, "route: the other pool of "+m.name+" failed this write; it is not acknowledged")
		}
	} else {
		out, _ = op.prim.X.AppendReply(out, m.d)
	}
	m.guard.end(op.keys)
	op.prim.Put()
	if op.other != nil {
		op.other.Put()
	}
	*op = writeOp{}
	writeOps.Put(op)
	x.Complete(out)
}
