package proxy

import (
	"slices"
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
	ignore   []subIgnore // confirmations of the proxy's own commands (undo's), to swallow
	released bool        // given back: what it still reports is ignored
}

// subIgnore is a confirmation the proxy's own command will get, which
// the client must not see. It is matched by kind and name, not by its
// place: undo sends its commands from a connection's reader, outside the
// order the session's reader stages the client's in.
type subIgnore struct {
	kind string
	name []byte
}

// subExpect is a command's part on one connection: the channels or
// patterns it sent there, each confirmed by one frame in order.
type subExpect struct {
	w      *subWait
	names  [][]byte // valid while w waits (they point into its request)
	frames int      // confirmations still to come: names[len(names)-frames] is next
}

// expect records that w's command sends names on c. Under mu.
func (c *subConn) expect(w *subWait, names [][]byte) {
	c.waits = append(c.waits, subExpect{w: w, names: names, frames: len(names)})
	w.left += len(names)
}

// confirms reports whether ps, a confirmation, is the one c's oldest
// command waits for next. Under mu.
func (c *subConn) confirms(ps *resp.Push) bool {
	if len(c.waits) == 0 {
		return false
	}
	e := &c.waits[0]
	return e.w.kind == ps.Kind && string(e.names[len(e.names)-e.frames]) == string(ps.Name)
}

// ignores reports whether ps, a confirmation, is one the proxy's own
// command waits for, and forgets it if so. Under mu.
func (c *subConn) ignores(ps *resp.Push) bool {
	for i, ig := range c.ignore {
		if ig.kind == ps.Kind && string(ig.name) == string(ps.Name) {
			c.ignore = append(c.ignore[:i], c.ignore[i+1:]...)
			return true
		}
	}
	return false
}

// stage stages name with args on c, in bt, which the session flushes
// after the client's replies are queued: no message of a new
// subscription can be queued before the confirmation it follows. Not
// under mu.
func (c *subConn) stage(name string, args [][]byte, bt *backend.Batch) {
	c.d.Stage(c.call(name, args), bt)
}

// call returns the call that sends name with args on c, completed (sent)
// once written.
func (c *subConn) call(name string, args [][]byte) *backend.Call {
	wire := resp.EncodeCommand(name, args)
	req := &codec.Request{Name: name, Route: codec.RouteSubscribe, Wire: wire, Buf: wire}
	return &backend.Call{Req: req, Timeout: -1, Done: c.sent}
}

// sent is the Done of a command sent on c: written, or failed.
func (c *subConn) sent(call *backend.Call) {
	if err := call.Reply.Err; err != nil {
		c.sub.lose(c, err)
	}
}

// release gives c's connection back, closed, and drops it from the
// client's connections. Under mu.
func (c *subConn) release() {
	if !c.released {
		c.released = true
		delete(c.sub.conns, c.b)
		c.sub.dp.Give(c.d, false)
	}
}

// unused reports whether c carries no subscription and no command
// waits on it: nothing left to keep it for. Under mu.
func (c *subConn) unused() bool { return c.subs == 0 && len(c.waits) == 0 }

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
		out := w.out
		if w.err != nil {
			out = w.err
		}
		w.p.Answer(append(w.p.Out(), out...))
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
	var undo []subSend
	var msg *pending
	var out []byte // msg's bytes, when not the frame's
	sub.mu.Lock()
	proto := sub.proto
	switch {
	case ps.Kind == "": // an error reply: the server refused the oldest command
		ready, undo = c.refused(ps.Error)
	case isMessage(ps.Kind):
		if sub.holds(c, &ps) {
			msg = sub.s.queueMessage(sub)
		}
	case ps.Kind == resp.PushPong:
	case c.confirms(&ps):
		ready = c.confirmed(ready)
	case c.ignores(&ps):
	case ps.Kind == resp.PushSunsubscribe:
		// Unsolicited: the node lost the channel's slot.
		if out = sub.dropShard(c, ps.Name); out != nil {
			msg = sub.s.queueMessage(sub)
		}
	default: // a confirmation out of place: counted as one
		ready = c.confirmed(ready)
	}
	if c.unused() {
		c.release()
	}
	sub.mu.Unlock()
	answerWaits(ready)
	sendAll(undo)
	if msg != nil {
		if out == nil {
			out = resp.AppendMessage(nil, frame, proto)
		}
		msg.Complete(out)
	}
}

// isMessage reports whether a push frame of kind is a message the client
// may have subscribed to: of a channel, a pattern or a shard channel.
func isMessage(kind string) bool {
	return kind == resp.PushMessage || kind == resp.PushPmessage || kind == resp.PushSmessage
}

// confirmed counts a confirmation against c's oldest command, and adds
// that command to ready once it has all of them. Under mu.
func (c *subConn) confirmed(ready []*subWait) []*subWait {
	if len(c.waits) == 0 {
		return ready
	}
	e := &c.waits[0]
	e.w.left--
	if e.frames--; e.frames == 0 {
		c.waits = c.waits[1:]
	}
	if e.w.left == 0 {
		ready = append(ready, e.w)
	}
	return ready
}

// refused fails c's oldest command with the server's error line. A
// subscribe command refused by one server is refused whole: the client
// holds none of the names it added, and the parts other servers took
// are unsubscribed again (undo, for the caller to send after mu). Under
// mu.
func (c *subConn) refused(line []byte) (ready []*subWait, undo []subSend) {
	if len(c.waits) == 0 {
		return nil, nil
	}
	e := c.waits[0]
	c.waits = c.waits[1:]
	w := e.w
	if w.err == nil {
		w.err = append(append([]byte{'-'}, line...), "\r\n"...)
		undo = c.sub.undo(w, c)
	}
	if w.left -= e.frames; w.left == 0 {
		ready = append(ready, w)
	}
	return ready, undo
}

// undoKinds names the command that takes back what a subscribe command
// did.
var undoKinds = map[string]string{
	resp.PushSubscribe:  resp.PushUnsubscribe,
	resp.PushPsubscribe: resp.PushPunsubscribe,
	resp.PushSsubscribe: resp.PushSunsubscribe,
}

// undo takes back the subscriptions w added, which the server behind
// refuser refused: the client's record drops them, and the commands that
// unsubscribe them on the other connections are returned. Under mu.
func (sub *subState) undo(w *subWait, refuser *subConn) []subSend {
	kind, ok := undoKinds[w.kind]
	if !ok || sub.closing || sub.lost {
		return nil
	}
	before := sub.total()
	var undo []subSend
	for _, sd := range w.sends {
		var names [][]byte
		for _, name := range sd.args {
			if sub.forget(w.kind, sd.c, name) && sd.c != refuser && !sd.c.released {
				names = append(names, append([]byte(nil), name...)) // outlives w's request
			}
		}
		if len(names) > 0 {
			for _, name := range names {
				sd.c.ignore = append(sd.c.ignore, subIgnore{kind: kind, name: name})
			}
			undo = append(undo, subSend{c: sd.c, cmd: kind, args: names})
		}
	}
	sub.counted(before)
	return undo
}

// forget drops name, of a subscribe command of kind, from the client's
// record of c, and reports whether c held it (a pattern's part: always).
// Under mu.
func (sub *subState) forget(kind string, c *subConn, name []byte) bool {
	switch kind {
	case resp.PushSubscribe, resp.PushSsubscribe:
		held := sub.channels
		if kind == resp.PushSsubscribe {
			held = sub.shards
		}
		if held[string(name)] != c {
			return false
		}
		delete(held, string(name))
		c.subs--
		return true
	}
	// A pattern is on several connections: the first of its parts
	// drops it from them all; c's part is to unsubscribe all the same.
	if conns := sub.patterns[string(name)]; slices.Contains(conns, c) {
		for _, pc := range conns {
			pc.subs--
		}
		delete(sub.patterns, string(name))
	}
	return true
}

// dropShard ends the client's shard channel name on c, which the server
// unsubscribed by itself, and returns the sunsubscribe the client gets
// (with its own count), or nil when the client does not hold it there.
// Under mu.
func (sub *subState) dropShard(c *subConn, name []byte) []byte {
	if sub.closing || sub.lost || sub.shards[string(name)] != c {
		return nil
	}
	before := sub.total()
	delete(sub.shards, string(name))
	c.subs--
	sub.counted(before)
	return resp.AppendSubscription(nil, resp.PushSunsubscribe, name, sub.count(resp.PushSunsubscribe), sub.proto)
}

// sendAll sends the proxy's own commands (undo's) on their connections.
// Not under mu: a connection that has failed fails the call at once,
// and its Done (lose) takes mu.
func sendAll(sends []subSend) {
	for _, sd := range sends {
		sd.c.d.Send(sd.c.call(sd.cmd, sd.args))
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
		sub.dp.SubDropped.Add(1)
		sub.pool.log.Info("slow subscriber disconnected", "pool", sub.pool.cfg.Name, "unwritten", s.held.Load())
		s.dropSlow()
		return nil
	}
	return s.queuePush(sub.pool)
}

// queuePush queues a frame the proxy pushes to the client on pool pl's
// behalf (a message, an invalidation) behind its replies so far, and
// returns its pending, not ready yet: the caller completes it.
func (s *session) queuePush(pl *pool) *pending {
	p := getPending()
	p.pool, p.sess = pl, s
	p.Req.Name = "message"
	p.push = true
	s.outstanding.Add(1)
	pl.inflight.Add(1)
	s.queue([]*pending{p})
	return p
}

// dropSlow disconnects a client that does not read: what it has not
// read is dropped (the socket is reset on close, its kernel buffers
// dropped too), and a write blocked on it returns.
func (s *session) dropSlow() {
	// Before writeFailed wakes the reader, which may close the socket.
	if tc, ok := s.nc.(interface{ SetLinger(int) error }); ok {
		tc.SetLinger(0) // reset: what the kernel holds for it goes too
	}
	s.nc.SetWriteDeadline(time.Now())
	s.writeFailed()
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
	c.release()
	var bye *pending
	if !sub.lost {
		sub.lost = true
		sub.dp.SubDropped.Add(1)
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
