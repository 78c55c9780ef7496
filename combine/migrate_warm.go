package combine

import (
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/codec"
	"shardproxy/memcache"
	"shardproxy/resp"
	"shardproxy/route"
)

// getOp is a one-key get in a warm phase: read from b; on a miss (or a
// failure) from a; a value a has is answered and added to b, with its
// remaining TTL and flags, if the guard allows.
//
// memcache reads a with "mg <key> v f t" and fills b with "ms ... ME"
// (memcache/fill.go). Redis reads a with GET and PTTL on the same socket,
// one after the other, and fills b with SET key value PX ttl NX: strings
// only (a GET of another type is an error, answered as it is, and nothing
// is filled), and the TTL is the one PTTL read just after the GET.
type getOp struct {
	m      *migrate
	x      *route.Exchange
	hint   uint32
	ticket uint64
	fromB  *route.Sub
	get    *route.Sub // a's reply (memcache: the mg; Redis: the GET)
	pttl   *route.Sub // Redis: a's PTTL
	left   atomic.Int32
}

var getOps = sync.Pool{New: func() any { return new(getOp) }}

func (m *migrate) routeWarmGet(x *route.Exchange) {
	op := getOps.Get().(*getOp)
	*op = getOp{m: m, x: x, hint: keyHint(x)}
	op.ticket = m.guard.ticket(x.Req.Keys[0])
	op.fromB = route.GetSub(op.bDone, nil)
	op.fromB.X.CopyRequest(&x.Req)
	op.fromB.Send(m.b, op.hint, x.Batch)
}

// bDone: a hit is answered; a miss or a failure is read from a.
func (op *getOp) bDone(s *route.Sub) {
	m := op.m
	kind, failed := s.X.Outcome()
	if !failed && kind != codec.ReplyMiss {
		m.counters.readsB.Add(1)
		op.answer(s)
		return
	}
	m.counters.fallbacks.Add(1)
	key := s.X.Req.Keys[0]
	if m.redis {
		op.get = route.GetSub(op.aDone, nil)
		op.get.X.CopyRequest(&s.X.Req)
		op.pttl = route.GetSub(op.aDone, nil)
		if m.parse(op.pttl, resp.EncodeCommand("PTTL", [][]byte{key})) != nil {
			op.pttl.Put()
			op.pttl = nil
		}
	} else {
		op.get = route.GetSub(op.aDone, nil)
		if !memcache.TextKey(key) || m.parse(op.get, memcache.AppendFetch(nil, key)) != nil {
			op.get.X.CopyRequest(&s.X.Req) // answered as it is, not filled
		}
	}
	if op.pttl != nil {
		op.left.Store(2)
		op.get.Send(m.a, op.hint, nil)
		op.pttl.Send(m.a, op.hint, nil)
		return
	}
	op.left.Store(1)
	op.get.Send(m.a, op.hint, nil)
}

func (op *getOp) aDone(*route.Sub) {
	if op.left.Add(-1) == 0 {
		op.settle()
	}
}

// settle answers the client from a's reply (b's miss when a missed too),
// and fills b from a hit.
func (op *getOp) settle() {
	m := op.m
	m.counters.readsA.Add(1)
	kind, failed := op.get.X.Outcome()
	switch {
	case failed:
		op.answer(op.get)
	case m.redis:
		if kind != codec.ReplyMiss {
			m.counters.fallbackHits.Add(1)
			op.fillRedis()
		}
		op.answer(op.get)
	case op.get.X.Req.Cmd != memcache.CmdMetaGet:
		op.answer(op.get)
	default:
		op.memcacheSettle()
	}
}

// memcacheSettle answers a's fetch in the client's words (a get hit, or
// b's miss) and fills b.
func (op *getOp) memcacheSettle() {
	m := op.m
	raw, _ := op.get.X.AppendReply(nil, m.d)
	it, hit, err := memcache.ParseFetch(raw)
	switch {
	case err != nil:
		op.answerBytes(m.d.AppendError(nil, codec.ErrServer, "route: "+m.name+" fallback read: "+firstLine(raw)))
	case !hit:
		op.answerBytes([]byte("END\r\n")) // the miss of a get
	default:
		m.counters.fallbackHits.Add(1)
		key := op.x.Req.Keys[0]
		if it.TTL != 0 { // 0: it expires within the second
			op.fill(memcache.AppendFill(nil, key, it, m.now()))
		}
		op.answerBytes(memcache.AppendHit(nil, key, it.Flags, it.Value))
	}
}

// fillRedis adds a's GET value to b with SET key value PX ttl NX.
func (op *getOp) fillRedis() {
	if op.pttl == nil {
		return
	}
	if _, failed := op.pttl.X.Outcome(); failed {
		return
	}
	raw, _ := op.pttl.X.AppendReply(nil, op.m.d)
	ttl, ok := resp.ReadInt(raw)
	got, _ := op.get.X.AppendReply(nil, op.m.d)
	val, null, isString := resp.ReadString(got)
	if !ok || !isString || null || ttl == -2 || ttl == 0 {
		return
	}
	args := [][]byte{op.x.Req.Keys[0], val}
	if ttl > 0 {
		args = append(args, []byte("PX"), strconv.AppendInt(nil, ttl, 10))
	}
	op.fill(resp.EncodeCommand("SET", append(args, []byte("NX"))))
}

// fill sends wire to b if the guard allows.
func (op *getOp) fill(wire []byte) {
	m := op.m
	s := route.GetSub(m.fillDone, nil)
	if m.parse(s, wire) != nil {
		s.Put()
		m.counters.fillFailures.Add(1)
		return
	}
	if !m.guard.fill(op.x.Req.Keys[0], op.ticket, func() { s.Send(m.b, op.hint, nil) }) {
		s.Put()
		m.counters.fillsRefused.Add(1)
	}
}

func (m *migrate) fillDone(s *route.Sub) {
	switch kind, failed := s.X.Outcome(); {
	case failed:
		m.counters.fillFailures.Add(1)
	case kind == codec.ReplyMiss || isNotStored(s, m.d):
		m.counters.fillsNotStored.Add(1)
	default:
		m.counters.fills.Add(1)
	}
	s.Put()
}

// isNotStored reports whether a fill's reply says it stored nothing
// (memcache NS, Redis a nil reply to SET NX).
func isNotStored(s *route.Sub, d codec.Dialect) bool {
	raw, _ := s.X.AppendReply(nil, d)
	switch string(raw) {
	case "NS\r\n", "$-1\r\n", "_\r\n":
		return true
	}
	return false
}

// answer answers the client with s's reply.
func (op *getOp) answer(s *route.Sub) {
	out, _ := s.X.AppendReply(nil, op.m.d)
	op.answerBytes(out)
}

// answerBytes answers the client with out and gives the op back.
func (op *getOp) answerBytes(out []byte) {
	x := op.x
	for _, s := range []*route.Sub{op.fromB, op.get, op.pttl} {
		if s != nil {
			s.Put()
		}
	}
	*op = getOp{}
	getOps.Put(op)
	x.Complete(out)
}

// firstLine is raw's first line, for a message.
func firstLine(raw []byte) string {
	for i, c := range raw {
		if c == '\r' || c == '\n' {
			return string(raw[:i])
		}
	}
	return string(raw)
}
