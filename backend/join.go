package backend

import "net"

// Joining: a dialect that is a codec.Joiner names requests its server
// answers one send each however they are batched (memcached's one-key
// text gets). A socket writes each run of such calls in a batch as one
// request, which the server answers with one send, and its reader frames
// the joined reply back into each call's own (Joiner.ParseJoined for all
// but the last call, whose part ends the joined reply and is framed as an
// ordinary reply to it).
//
// A run stops at maxJoin calls, at a joined line of maxJoinLine bytes, and
// before a key it already holds: memcached reads a get line of any length,
// but one much longer than its 2 KB first read takes its slow path, and a
// key asked twice would leave two parts naming the same key.
const (
	maxJoin     = 32
	maxJoinLine = 2048
)

// join appends to bufs the wire of batch's calls, each run of calls it may
// join as one request, and marks the calls joined (all but the last of a
// run). The joined requests live in s.joinBuf until the next batch. Only
// the writer calls it, before the hand-off.
func (s *sock) join(batch []*Call, bufs net.Buffers) net.Buffers {
	j := s.c.b.joiner
	s.joinBuf = s.joinBuf[:0]
	if cap(s.joinBuf) > 64<<10 {
		s.joinBuf = nil // one huge batch is not kept for good
	}
	for i := 0; i < len(batch); {
		n := s.joinRun(batch[i:])
		if n == 1 {
			batch[i].joined = false
			bufs = append(bufs, batch[i].Req.Wire)
			i++
			continue
		}
		reqs := s.joinReqs[:0]
		for _, call := range batch[i : i+n] {
			call.joined = true
			reqs = append(reqs, call.Req)
		}
		batch[i+n-1].joined = false
		at := len(s.joinBuf)
		s.joinBuf = j.AppendJoined(s.joinBuf, reqs)
		bufs = append(bufs, s.joinBuf[at:len(s.joinBuf):len(s.joinBuf)])
		// RequestBytes keeps counting each request as it was queued: how
		// many others it met in a batch is timing, and a request's count
		// does not depend on it.
		clear(reqs)
		s.joinReqs = reqs[:0]
		i += n
	}
	return bufs
}

// joinRun returns how many calls at batch's start join into one request:
// 1 when the first is never joined or none after it joins it.
func (s *sock) joinRun(batch []*Call) int {
	j := s.c.b.joiner
	class := j.JoinClass(batch[0].Req)
	if class == 0 {
		return 1
	}
	line := len("gets \r\n") + len(batch[0].Req.Keys[0])
	n := 1
	for ; n < len(batch) && n < maxJoin; n++ {
		req := batch[n].Req
		if j.JoinClass(req) != class {
			break
		}
		key := req.Keys[0]
		if line += 1 + len(key); line > maxJoinLine || joinHolds(batch[:n], key) {
			break
		}
	}
	return n
}

// joinHolds reports whether a call of run asks for key.
func joinHolds(run []*Call, key []byte) bool {
	for _, call := range run {
		if string(call.Req.Keys[0]) == string(key) {
			return true
		}
	}
	return false
}
