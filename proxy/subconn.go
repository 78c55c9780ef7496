package proxy

import (
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/resp"
)

// subConn is one server connection of a client's subscriptions (see
// pubsub.go). Its fields are under its subState's mu.
type subConn struct {
	sub      *subState
	b        *backend.Backend
	d        *backend.Dedicated
	subs     int         // the client's channels, patterns and shard channels on it
	waits    []subExpect // confirmations expected, oldest first
	released bool        // given back: what it still reports is ignored
}

// subExpect is a command's part on one connection: how many frames
// confirm it.
type subExpect struct {
	w      *subWait
	frames int
}

// expect records that w's command sends n channels or patterns on c,
// each confirmed by one frame. Under mu.
func (c *subConn) expect(w *subWait, n int) {
	c.waits = append(c.waits, subExpect{w: w, frames: n})
	w.left += n
}

// stage stages name with args on c, in bt, which the session flushes
// after the client's replies are queued: no message of a new
// subscription can be queued before the confirmation it follows. Not
// under mu.
func (c *subConn) stage(name string, args [][]byte, bt *backend.Batch) {
	wire := resp.EncodeCommand(name, args)
	req := &codec.Request{Name: name, Route: codec.RouteSubscribe, Wire: wire, Buf: wire}
	c.d.Stage(&backend.Call{Req: req, Timeout: -1, Done: c.sent}, bt)
}

// sent is the Done of a command sent on c: written, or failed.
func (c *subConn) sent(call *backend.Call) {
	if err := call.Reply.Err; err != nil {
		c.sub.lose(c, err)
	}
}

// release gives c's connection back, closed. Under mu.
func (c *subConn) release() {
	if !c.released {
		c.released = true
		c.sub.dp.give(c.d, false)
	}
}

// drop ends every wait of c: each command's part counts as confirmed
// (err nil) or failed with err. It appends the commands that have all
// their parts to ready. Under mu.
func (c *subConn) drop(ready []*subWait, err []byte) []*subWait {
	for _, e := range c.waits {
		if err != nil && e.w.err == nil {
			e.w.err = err
		}
		if e.w.left -= e.frames; e.w.left == 0 {
			ready = append(ready, e.w)
		}
	}
	c.waits = nil
	return ready
}

// answerWaits answers the commands whose parts are all confirmed.
func answerWaits(ready []*subWait) {
	for _, w := range ready {
		p := w.p
		if w.err != nil {
			p.Answer(append(p.Out(), w.err...))
		} else {
			p.Answer(append(p.Out(), w.out...))
		}
	}
}

// push is c's backend.PushFunc: on the connection's reader goroutine, it
// confirms the client's commands and passes messages on.
func (c *subConn) push(frame []byte, err error) {
	sub := c.sub
	if err != nil {
		sub.lose(c, err)
		return
	}
	ps, perr := resp.ReadPush(frame)
	if perr != nil {
		sub.lose(c, perr)
		return
	}
	var ready []*subWait
	var msg *pending
	sub.mu.Lock()
	switch ps.Kind {
	case "": // an error reply: the server refused the oldest command
		if len(c.waits) > 0 {
			e := c.waits[0]
			c.waits = c.waits[1:]
			e.w.err = append(append([]byte{'-'}, ps.Error...), "\r\n"...)
			if e.w.left -= e.frames; e.w.left == 0 {
				ready = append(ready, e.w)
			}
		}
	case resp.PushMessage, resp.PushPmessage, resp.PushSmessage:
		if sub.holds(c, &ps) {
			msg = sub.s.queueMessage(sub)
		}
	case resp.PushPong:
	default: // a confirmation
		if len(c.waits) > 0 {
			e := &c.waits[0]
			e.w.left--
			if e.frames--; e.frames == 0 {
				c.waits = c.waits[1:]
			}
			if e.w.left == 0 {
				ready = append(ready, e.w)
			}
		}
	}
	if c.subs == 0 && len(c.waits) == 0 && !c.released {
		delete(sub.conns, c.b)
		c.release()
	}
	sub.mu.Unlock()
	answerWaits(ready)
	if msg != nil {
		msg.Complete(resp.AppendMessage(nil, frame))
	}
}

// holds reports whether the client holds what a message was sent for,
// on c. Under mu.
func (sub *subState) holds(c *subConn, ps *resp.Push) bool {
	if sub.lost || sub.closing || c.released {
		return false
	}
	switch ps.Kind {
	case resp.PushMessage:
		return sub.channels[string(ps.Name)] == c
	case resp.PushSmessage:
		return sub.shards[string(ps.Name)] == c
	}
	return sub.patterns[string(ps.Name)] != nil
}

// queueMessage queues a message for the client behind its replies so
// far, and returns its pending for the caller to complete (after mu). A
// client with more than maxHeld bytes unwritten gets none: it is
// disconnected (see dropSlow). Under sub.mu.
func (s *session) queueMessage(sub *subState) *pending {
	if s.held.Load() > maxHeld {
		sub.lost = true
		sub.dp.subDropped.Add(1)
		sub.pool.log.Info("slow subscriber disconnected", "pool", sub.pool.cfg.Name, "unwritten", s.held.Load())
		s.dropSlow()
		return nil
	}
	p := getPending()
	p.pool, p.sess = sub.pool, s
	p.Req.Name = "message"
	s.outstanding.Add(1)
	sub.pool.inflight.Add(1)
	s.w.mu.Lock()
	s.w.fifo = append(s.w.fifo, p)
	s.w.mu.Unlock()
	return p
}

// dropSlow disconnects a client that does not read: what it has not
// read is dropped (the socket is reset on close, its kernel buffers
// dropped too), and a write blocked on it returns.
func (s *session) dropSlow() {
	s.w.mu.Lock()
	s.w.broken, s.w.failed = true, true
	s.w.mu.Unlock()
	s.closing.Store(true)
	if tc, ok := s.nc.(interface{ SetLinger(int) error }); ok {
		tc.SetLinger(0) // reset: what the kernel holds for it goes too
	}
	now := time.Now()
	s.nc.SetWriteDeadline(now)
	s.nc.SetReadDeadline(now)
}

// lose handles the failure of c's connection (err): unless the proxy
// closed it itself, the commands waiting on it fail with the error, or
// when none did the client gets the error alone, and then its
// connection is closed.
func (sub *subState) lose(c *subConn, err error) {
	sub.mu.Lock()
	if c.released || sub.closing {
		sub.mu.Unlock()
		return
	}
	msg := "pub/sub connection to server " + c.b.Name() + " lost: " + err.Error()
	reply := sub.pool.dialect.AppendError(nil, codec.ErrServer, msg)
	ready := c.drop(nil, reply)
	delete(sub.conns, c.b)
	c.release()
	var bye *pending
	if !sub.lost {
		sub.lost = true
		sub.dp.subDropped.Add(1)
		sub.pool.log.Warn("subscriber disconnected: server connection lost", "pool", sub.pool.cfg.Name,
			"server", c.b.Name(), "err", err)
		bye = sub.s.queueMessage(sub)
	}
	sub.mu.Unlock()
	answerWaits(ready)
	if bye != nil {
		bye.Req.Close = true // the writer closes the client after it
		if len(ready) > 0 {
			reply = nil // a command's reply told the client already
		}
		bye.Complete(reply)
	}
}
