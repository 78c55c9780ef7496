package proxy

import (
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/kind"
)

// CLIENT PAUSE through the proxy. The servers hold what a pause holds
// (writes, scripts that may write, EXEC of a transaction with writes, or
// everything), each of its own clients; the proxy forwards CLIENT PAUSE
// and UNPAUSE to every server (redis_config, as CONFIG SET) and, while
// the pause lasts, sends its clients' commands that have keys on one
// server on connections of their own (the pool's dedicated connections),
// not on the connection it shares among them: a held write would hold
// every other client's command behind it. The server then holds it as it
// holds its own client, counts it in blocked_clients, and lets it go at
// UNPAUSE or the timeout. The client waits for the reply before its next
// command is routed, as a paused client of Redis does.

// routePaused notes a CLIENT PAUSE or UNPAUSE in the pool (the request
// then goes on as any) and, while a pause is on, sends p on a dedicated
// connection. It returns false for the session to route p as any
// request: one with no keys, keys on several servers, or a pool without
// dedicated connections.
func (s *session) routePaused(p *pending, pl *pool) bool {
	switch p.Req.Pause {
	case codec.PauseOn:
		end := s.readAt.Add(p.Req.Block).UnixNano()
		for {
			cur := pl.paused.Load()
			if cur >= end || pl.paused.CompareAndSwap(cur, end) {
				return false
			}
		}
	case codec.PauseOff:
		pl.paused.Store(0)
		return false
	}
	end := pl.paused.Load()
	if end == 0 || s.readAt.UnixNano() >= end {
		pl.paused.CompareAndSwap(end, 0)
		return false
	}
	if len(p.Req.Keys) == 0 || p.Req.Part != codec.PartWhole {
		return false
	}
	dp := pl.order
	if dp == nil {
		return false
	}
	b, _, refusal := pl.router.(kind.Dedicator).Place(&p.Req, s.id)
	if refusal != nil {
		return false
	}
	d, refusal := dp.Take(b, p.Req.Proto, pl.dialect)
	if refusal != nil {
		s.answerRaw(p, string(refusal))
		return true
	}
	if !s.admit(p, len(p.Req.Keys)) {
		dp.Give(d, true)
		return true
	}
	s.blocked.add(d)
	p.Hint = s.id
	p.Batch = &s.batch
	p.SendOn(d, s.blockTimeout(time.Duration(end-s.readAt.UnixNano())), func(c *backend.Call) {
		s.blocked.remove(d)
		dp.Give(d, c.Reply.Err == nil)
	})
	s.unpinned = true // the next request waits for this one's reply
	return true
}
