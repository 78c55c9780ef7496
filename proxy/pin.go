package proxy

import (
	"sync"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/kind"
)

// This file serves the Redis commands that need a server connection of
// the client's own (a kind.DedicatedPool's), on the session's reader goroutine:
//
//   - A blocking command (codec.RouteBlock) takes a connection to the
//     server of its keys for as long as it waits, with its own timeout
//     plus the pool's in place of the pool's, and gives it back with its
//     reply. A client that disconnects meanwhile gets its connection
//     closed at once: redis-server unblocks a client only when it
//     disconnects (or on CLIENT UNBLOCK, which would need the server's id
//     of the connection and a second connection allowed to send it).
//   - A transaction pins the client to one connection: WATCH, or the first
//     command with keys after MULTI, chooses the server (a cluster: the
//     slot); every later command goes on that connection, and keys
//     elsewhere are refused with -CROSSSLOT, which makes EXEC abort as
//     Redis aborts a transaction with a refused command. EXEC, DISCARD,
//     UNWATCH (outside MULTI) end the pin and the connection, clean, goes
//     back to the pool; a client that leaves while pinned has its
//     connection closed, which drops what it watched and queued.
//
// MULTI itself is answered by the proxy until the server is known, and
// so are the keyless commands queued before it (+QUEUED); they go to the
// server, their replies dropped, ahead of the first command with keys (or
// of EXEC, to any server, when no command named a key). A command for
// every server marked codec.Request.TxOne (DEBUG SLEEP, ...) is one of
// them: it runs on the transaction's server, as on a lone redis-server;
// the other commands for every server queued inside MULTI go to the other
// servers after EXEC (multiall.go).

// Wire bytes the proxy sends on a pinned connection itself.
var (
	multiWire   = []byte("*1\r\n$5\r\nMULTI\r\n")
	discardWire = []byte("*1\r\n$7\r\nDISCARD\r\n")
	hello2Wire  = []byte("*2\r\n$5\r\nHELLO\r\n$1\r\n2\r\n")
	hello3Wire  = []byte("*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
)

// Replies the proxy gives in a transaction's place, as redis-server words
// them.
const (
	replyOK          = "+OK\r\n"
	replyQueued      = "+QUEUED\r\n"
	replyExecAbort   = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	replyNestedMulti = "-ERR MULTI calls can not be nested\r\n"
	replyWatchMulti  = "-ERR WATCH inside MULTI is not allowed\r\n"
	replyExecNoMulti = "-ERR EXEC without MULTI\r\n"
	replyDiscardNo   = "-ERR DISCARD without MULTI\r\n"
)

// pinState is a session's transaction (reader only).
type pinState struct {
	dp        *kind.DedicatedPool
	d         *backend.Dedicated // nil until a command chose the server
	where     int                // the place of the keys (kind.Dedicator.Place), -1 while any
	multi     bool               // the client sent MULTI
	sent      bool               // MULTI went to the server
	held      [][]byte           // keyless commands queued before the server was known
	heldBytes int                // their size
	abort     bool               // a command of the transaction was refused: EXEC aborts
	queued    int                // the commands queued inside MULTI, held ones too
	every     []everyCmd         // those for every server, for the others at EXEC (multiall.go)
	everySize int                // their size
	proto     uint8              // the protocol d speaks now (a HELLO while pinned changes it)
}

// setConn gives the pin its connection d.
func (pin *pinState) setConn(d *backend.Dedicated, where int) {
	pin.d, pin.where, pin.proto = d, where, d.Proto()
}

// reusable reports whether the pin's connection, its transaction over,
// may serve another client: it speaks the protocol it was made for.
func (pin *pinState) reusable() bool { return pin.d != nil && pin.proto == pin.d.Proto() }

// blockedConns are the dedicated connections with a blocking command of
// the session's in flight: the reader closes them when the client leaves.
type blockedConns struct {
	mu    sync.Mutex
	conns map[*backend.Dedicated]int
}

func (bc *blockedConns) add(d *backend.Dedicated) {
	bc.mu.Lock()
	if bc.conns == nil {
		bc.conns = map[*backend.Dedicated]int{}
	}
	bc.conns[d]++
	bc.mu.Unlock()
}

func (bc *blockedConns) remove(d *backend.Dedicated) {
	bc.mu.Lock()
	if bc.conns[d]--; bc.conns[d] <= 0 {
		delete(bc.conns, d)
	}
	bc.mu.Unlock()
}

// closeAll closes every connection still blocked: their commands fail,
// and the server forgets the blocked client at once.
func (bc *blockedConns) closeAll() {
	bc.mu.Lock()
	conns := make([]*backend.Dedicated, 0, len(bc.conns))
	for d := range bc.conns {
		conns = append(conns, d)
	}
	bc.mu.Unlock()
	for _, d := range conns {
		d.Close()
	}
}

// routeDedicated serves p if it needs a connection of the client's own,
// or because the client is pinned, and reports whether it did.
func (s *session) routeDedicated(p *pending) bool {
	r := p.Req.Route
	if s.pin == nil && r != codec.RouteBlock && r != codec.RoutePin {
		return false
	}
	p.Hint = s.id
	p.Batch = &s.batch
	dd, ok := s.p.router.(kind.Dedicator)
	if !ok || dd.Dedicated() == nil {
		s.answerRaw(p, string(s.p.dialect.AppendError(nil, codec.ErrServer,
			commandName(p)+" is not supported by this pool")))
		return true
	}
	if s.pin != nil {
		if p.Req.Route == codec.RouteAll && !s.pin.multi {
			s.routeWatchingAll()
			return false
		}
		s.routePinned(p, dd)
		return true
	}
	if r == codec.RouteBlock {
		if p.Req.Script == codec.ScriptRun {
			s.routeScript(p, dd)
			return true
		}
		s.routeBlocking(p, dd)
		return true
	}
	s.routePinStart(p, dd)
	return true
}

// routeBlocking sends a blocking command on a connection of its own.
func (s *session) routeBlocking(p *pending, dd kind.Dedicator) {
	dp := dd.Dedicated()
	d, _ := s.dedicate(p, dd, dp)
	if d == nil {
		return
	}
	if !s.admit(p, len(p.Req.Keys)) {
		dp.Give(d, true)
		return
	}
	s.blocked.add(d)
	dp.Blocked.Add(1)
	p.Order(dp.Order(d.Backend(), s.arrivedAt()))
	p.SendOn(d, s.blockTimeout(p.Req.Block), func(c *backend.Call) {
		dp.Blocked.Add(-1)
		s.blocked.remove(d)
		dp.Give(d, c.Reply.Err == nil)
	})
}

// pingBusy sends a PING (codec.ScriptPing) to a server of the pool that
// runs a script on a dedicated connection, whose answer is Redis's
// (-BUSY while the script is past its threshold, else PONG). It returns
// false, for the proxy to answer, when no script runs.
func (s *session) pingBusy(p *pending) bool {
	if s.p.order == nil {
		return false
	}
	b := s.p.order.ScriptServer()
	if b == nil {
		return false
	}
	p.Hint = s.id
	p.Tag = s.tag
	p.Batch = &s.batch
	p.Pipes = nil
	p.Send(b)
	return true
}

// arrivedAt is when the current read's bytes reached the proxy: the
// kernel's time when the reader has it, else the read's.
func (s *session) arrivedAt() time.Time {
	if s.arrived != 0 {
		return time.Unix(0, s.arrived)
	}
	return s.readAt
}

// dedicate takes a connection of dp to the server of p's keys (any
// server when it has none) and returns it with the keys' place
// (kind.Dedicator.Place). When the keys cannot be placed or no connection is
// free, it answers p with the refusal and returns nil.
func (s *session) dedicate(p *pending, dd kind.Dedicator, dp *kind.DedicatedPool) (*backend.Dedicated, int) {
	b, where, refusal := dd.Place(&p.Req, s.id)
	if refusal == nil {
		var d *backend.Dedicated
		if d, refusal = dp.Take(b, p.Req.Proto, s.p.dialect); refusal == nil {
			return d, where
		}
	}
	s.answerRaw(p, string(refusal))
	return nil, where
}

// blockTimeout is the timeout of a call that may block for wait (see
// codec.Request.Block): wait plus the pool's timeout, none when either is
// forever, the pool's when wait is no valid timeout (the server answers
// at once).
func (s *session) blockTimeout(wait time.Duration) time.Duration {
	pool := s.p.cfg.Timeout
	switch {
	case wait < 0:
		return 0
	case wait == 0 || pool <= 0:
		return -1
	}
	return wait + pool
}

// routeWatchingAll lets a command for every server (FLUSHALL, FLUSHDB,
// CONFIG SET ...) of a client that WATCHes keys, not yet in MULTI, go as
// any client's does, over the shared connections: a server's WATCH sees
// a change by any of its clients, so a FLUSHALL touches the watched keys
// as when sent on the client's own connection. The client's commands
// before it are answered first, and the next waits for its reply, so its
// order holds across the two connections.
func (s *session) routeWatchingAll() {
	s.drainWait()
	s.unpinned = true
}

// routePinStart serves a transaction command of a client not pinned.
func (s *session) routePinStart(p *pending, dd kind.Dedicator) {
	switch p.Req.Pin {
	case codec.PinMulti:
		s.pin = &pinState{dp: dd.Dedicated(), where: -1, multi: true}
		s.view.multi.Store(1)
		s.pin.dp.Pinned.Add(1)
		s.answerRaw(p, replyOK)
	case codec.PinWatch:
		dp := dd.Dedicated()
		d, where := s.dedicate(p, dd, dp)
		if d == nil {
			return
		}
		s.pin = &pinState{dp: dp}
		s.pin.setConn(d, where)
		dp.Pinned.Add(1)
		s.sendPinned(p, 0, false)
	case codec.PinExec:
		s.answerRaw(p, replyExecNoMulti)
	case codec.PinDiscard:
		s.answerRaw(p, replyDiscardNo)
	case codec.PinUnwatch:
		s.answerRaw(p, replyOK)
	default: // WAIT
		s.answerRaw(p, string(s.p.dialect.AppendError(nil, codec.ErrServer, "WAIT is not supported by shardproxy "+
			"outside a transaction: the writes it would wait for went over connections shared by many clients")))
	}
}

// routePinned serves any request of a pinned client.
func (s *session) routePinned(p *pending, dd kind.Dedicator) {
	req := &p.Req
	switch req.Route {
	case codec.RouteLocal:
		s.routePinnedLocal(p, dd)
		return
	case codec.RouteAll:
		if req.TxOne { // as keyless, on the transaction's server (DEBUG)
			break
		}
		if msg := s.queueEvery(p); msg != "" {
			s.refuseInPin(p, msg)
			return
		}
	case codec.RoutePin:
		if s.routePinCommand(p, dd) {
			return
		}
	}
	if !s.placePinned(p, dd) || !s.connectPin(p, dd) {
		return
	}
	var timeout time.Duration
	if req.Route == codec.RouteBlock && !s.pin.multi { // inside MULTI it does not block
		timeout = s.blockTimeout(req.Block)
	}
	s.sendPinned(p, timeout, false)
}

// placePinned asks the router where p goes, and reports whether it may go
// on the pinned connection; false when p is answered (refused, or its keys
// are on another server than the pin's: a transaction whose command is
// refused is aborted) or held (keyless, before any key: held until the
// server is known).
func (s *session) placePinned(p *pending, dd kind.Dedicator) bool {
	pin := s.pin
	_, where, refusal := dd.Place(&p.Req, s.id)
	if refusal == nil && where >= 0 && pin.where >= 0 && where != pin.where {
		refusal = kind.AppendCrossSlot(nil, s.p.dialect)
	}
	if refusal != nil {
		if pin.multi {
			pin.abort = true
		}
		s.answerRaw(p, string(refusal))
		return false
	}
	if pin.d == nil && where < 0 {
		s.hold(p)
		return false
	}
	return true
}

// routePinCommand serves a transaction command of a pinned client, and
// reports whether it did; false passes it on as a command for the pinned
// connection.
func (s *session) routePinCommand(p *pending, dd kind.Dedicator) bool {
	pin := s.pin
	switch p.Req.Pin {
	case codec.PinMulti:
		if pin.multi {
			s.answerRaw(p, replyNestedMulti) // not an error that aborts, as in Redis
			return true
		}
		pin.multi, pin.sent = true, true
		s.view.multi.Store(1)
		return false // WATCH chose the connection: MULTI goes on it
	case codec.PinWatch:
		if pin.multi {
			s.answerRaw(p, replyWatchMulti)
			return true
		}
		return false
	case codec.PinExec:
		s.execPinned(p, dd)
		return true
	case codec.PinDiscard:
		s.discardPinned(p)
		return true
	case codec.PinUnwatch:
		s.unwatchPinned(p)
		return true
	case codec.PinWait:
		s.waitPinned(p)
		return true
	}
	return false
}

// execPinned serves EXEC: outside MULTI, or after a command of the
// transaction was refused, the proxy answers it; else it ends the pin on
// its connection.
func (s *session) execPinned(p *pending, dd kind.Dedicator) {
	pin := s.pin
	if !pin.multi {
		s.answerRaw(p, replyExecNoMulti)
		return
	}
	if pin.abort {
		s.abortPin(p)
		return
	}
	if pin.d == nil && !s.connectPin(p, dd) {
		return
	}
	if len(pin.every) > 0 {
		s.execEvery(p, dd)
		return
	}
	s.sendPinned(p, 0, true)
}

// discardPinned serves DISCARD: outside MULTI the proxy answers it, and a
// transaction that never reached a server ends here.
func (s *session) discardPinned(p *pending) {
	pin := s.pin
	if !pin.multi {
		s.answerRaw(p, replyDiscardNo)
		return
	}
	if pin.d == nil {
		s.endPin(false)
		s.answerRaw(p, replyOK)
		return
	}
	s.sendPinned(p, 0, true)
}

// unwatchPinned serves UNWATCH, which ends a pin outside MULTI.
func (s *session) unwatchPinned(p *pending) {
	if s.pin.d == nil { // MULTI without a server: nothing is watched
		s.hold(p)
		return
	}
	s.sendPinned(p, 0, !s.pin.multi)
}

// waitPinned serves WAIT, which blocks outside MULTI.
func (s *session) waitPinned(p *pending) {
	pin := s.pin
	if pin.d == nil {
		s.hold(p)
		return
	}
	var timeout time.Duration
	if !pin.multi {
		timeout = s.blockTimeout(p.Req.Block)
	}
	s.sendPinned(p, timeout, false)
}

// routePinnedLocal serves a command the proxy answers itself, for a
// pinned client: inside MULTI, PING and ECHO are queued on the server;
// QUIT and RESET end the transaction; the other session commands (AUTH,
// SELECT, CLIENT ...) are refused, which aborts it. Outside MULTI they
// are answered as usual.
func (s *session) routePinnedLocal(p *pending, dd kind.Dedicator) {
	pin := s.pin
	switch {
	case p.Req.Name == "reset" || p.Req.Close:
		s.endPin(false)
		s.answerLocal(p)
	case !pin.multi:
		if p.Req.Name == "hello" && pin.d != nil && p.Req.Proto != pin.proto {
			// The client switched protocol (HELLO 3 or 2 after WATCH):
			// so does its connection, whose replies it reads as they are.
			pin.proto = p.Req.Proto
			wire := hello2Wire
			if pin.proto != 0 {
				wire = hello3Wire
			}
			s.sendQuiet(wire)
		}
		s.answerLocal(p)
	case p.Req.Name == "slowlog|reset":
		// The pool's slowlog is the proxy's: it is reset as the command
		// is queued (a DISCARD does not bring it back); the server's own
		// is reset at EXEC, whose reply holds its OK.
		s.p.SlowlogReset()
		fallthrough
	case p.Req.Name == "ping" || p.Req.Name == "echo":
		if pin.d == nil {
			s.hold(p)
			return
		}
		s.sendPinned(p, 0, false) // Wire is the request; the proxy's reply is kept after it

	default:
		s.refuseInPin(p, commandName(p)+" inside MULTI is not supported by shardproxy")
	}
}

// maxHeldBytes bounds the keyless commands a transaction may queue before
// it names a key (the proxy holds them).
const maxHeldBytes = 1 << 20

// hold queues a keyless command of a transaction whose server is not known
// yet, answering +QUEUED as the server would; past maxHeldBytes it is
// refused, which aborts the transaction.
func (s *session) hold(p *pending) {
	pin := s.pin
	if pin.heldBytes+len(p.Req.Wire) > maxHeldBytes {
		s.refuseInPin(p, "too many commands queued before the transaction named a key")
		return
	}
	pin.heldBytes += len(p.Req.Wire)
	pin.held = append(pin.held, append([]byte(nil), p.Req.Wire...))
	s.queuedInMulti()
	s.answerRaw(p, replyQueued)
}

// connectPin gives the pin its connection, to the server of p's keys (any
// server when it has none), if it has none yet, and sends what MULTI
// held. It answers p and returns false when no connection is free.
func (s *session) connectPin(p *pending, dd kind.Dedicator) bool {
	pin := s.pin
	if pin.d != nil {
		return true
	}
	d, w := s.dedicate(p, dd, pin.dp)
	if d == nil {
		pin.abort = true
		return false
	}
	pin.setConn(d, w)
	if pin.multi && !pin.sent {
		pin.sent = true
		s.sendQuiet(multiWire)
	}
	for _, w := range pin.held {
		s.sendQuiet(w)
	}
	pin.held, pin.heldBytes = nil, 0
	return true
}

// sendPinned sends p on the pinned connection with the call timeout
// (see backend.Call.Timeout); last ends the pin once its reply is in,
// the connection given back clean.
func (s *session) sendPinned(p *pending, timeout time.Duration, last bool) {
	pin := s.pin
	if !s.admit(p, len(p.Req.Keys)) {
		if pin.multi {
			pin.abort = true
		}
		return
	}
	d := pin.d
	if pin.multi && !last && p.Req.Pin != codec.PinMulti {
		s.queuedInMulti()
	}
	if timeout != 0 {
		s.blocked.add(d)
	}
	var after func(*backend.Call)
	switch {
	case last:
		dp, reuse := pin.dp, pin.reusable()
		s.dropPin(pin)
		s.unpinned = true
		after = func(c *backend.Call) { dp.Give(d, reuse && c.Reply.Err == nil) }
	case timeout != 0:
		after = func(*backend.Call) { s.blocked.remove(d) }
	}
	p.SendOn(d, timeout, after)
}

// sendQuiet sends wire on the pinned connection; its reply is dropped.
func (s *session) sendQuiet(wire []byte) {
	req := &codec.Request{Name: "pinned", Route: codec.RoutePin, Wire: wire, Buf: wire}
	s.pin.d.Stage(&backend.Call{Req: req, Done: (*backend.Call).Release}, &s.batch)
}

// abortPin answers EXEC after a refused command: the server's transaction
// is discarded, and the pin ends.
func (s *session) abortPin(p *pending) { s.abortPinWith(p, replyExecAbort) }

// abortPinWith discards the transaction as abortPin does, answering EXEC
// with reply.
func (s *session) abortPinWith(p *pending, reply string) {
	pin := s.pin
	if pin.d != nil && pin.sent {
		// The server has the commands that were not refused queued:
		// DISCARD them, and give the connection back once it is clean.
		dp, d, reuse := pin.dp, pin.d, pin.reusable()
		req := &codec.Request{Name: "discard", Route: codec.RoutePin, Wire: discardWire, Buf: discardWire}
		d.Stage(&backend.Call{Req: req, Done: func(c *backend.Call) {
			dp.Give(d, reuse && c.Reply.Err == nil)
			c.Release()
		}}, &s.batch)
		pin.d = nil
		s.unpinned = true
	}
	s.endPin(false)
	s.answerRaw(p, reply)
}

// refuseInPin answers p with an error of the proxy's; inside MULTI it
// aborts the transaction, as Redis aborts one with a refused command.
func (s *session) refuseInPin(p *pending, msg string) {
	if s.pin.multi {
		s.pin.abort = true
	}
	s.answerRaw(p, string(s.p.dialect.AppendError(nil, codec.ErrClient, msg)))
}

// endPin ends the transaction. Its connection, if still held, is given
// back: kept when reuse says it is clean, else closed, dropping what the
// client watched and queued there.
func (s *session) endPin(reuse bool) {
	pin := s.pin
	if pin == nil {
		return
	}
	s.dropPin(pin)
	if pin.d != nil {
		pin.dp.Give(pin.d, reuse && pin.reusable())
	}
}

// dropPin ends pin, the client's: its connection, if any, is the
// caller's to give back.
func (s *session) dropPin(pin *pinState) {
	s.pin = nil
	s.view.multi.Store(0)
	pin.dp.Pinned.Add(-1)
}

// noteRefused tells a transaction that the proxy refused one of its
// commands before routing it (a protocol error, an unknown command): EXEC
// then aborts, as in Redis.
func (s *session) noteRefused() {
	if s.pin != nil && s.pin.multi {
		s.pin.abort = true
	}
}

// answerRaw answers p with bytes of the proxy's own.
func (s *session) answerRaw(p *pending, reply string) {
	p.Answer(append(p.Out(), reply...))
}

// answerLocal answers a command the proxy serves itself.
func (s *session) answerLocal(p *pending) {
	s.counts.publish()
	s.appendLocal(p, s.p)
}

// commandName is p's command in capitals, for messages.
func commandName(p *pending) string {
	b := []byte(p.Req.Name)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c == '|':
			b[i] = ' '
		}
	}
	return string(b)
}

// queuedInMulti counts a command queued in the client's transaction: its
// place among the transaction's replies (pin.queued) and CLIENT LIST's
// multi. Reader only.
func (s *session) queuedInMulti() {
	s.pin.queued++
	s.view.multi.Add(1)
}
