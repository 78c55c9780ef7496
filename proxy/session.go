package proxy

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/resp"
	"shardproxy/route"
)

const (
	// maxPending bounds the requests one client may have in flight; the
	// reader stops reading from the client while the queue is full.
	maxPending = 128
	// maxHeld bounds the reply bytes one client may have waiting to be
	// written: past it the reader stops reading until the client reads. A
	// client that never reads its replies so costs at most maxHeld plus the
	// replies to its maxPending requests in flight.
	maxHeld    = 4 << 20
	readChunk  = 16 << 10 // read buffer of a busy session
	idleChunk  = 1 << 10  // read buffer of a quiet one: idle connections stay cheap
	writeBatch = 64 << 10
	// quietReads is how many small reads in a row make a busy session
	// drop back to its idle buffer.
	quietReads = 64
)

// session is one client connection.
type session struct {
	l       *listener
	p       *pool  // the pool the reader routes with; reloads change it
	tag     string // the listener's tag for p (listen_tags)
	nc      net.Conn
	id      uint32
	parser  codec.RequestParser
	parts   codec.PartParser // parser, when it cuts long requests into parts
	closing atomic.Bool      // stop reading: shutdown or a fatal protocol error
	// draining: the server drains; stop reading at the next request
	// boundary (drain.go, readloop.go)
	draining  atomic.Bool
	lingering atomic.Bool            // drained: everything answered, waiting for the client to close (linger)
	passTo    func(HandedConn) error // the drain's hand-off (handoff.go); nil: none. Set before draining
	passing   bool                   // drained: the connection is to be handed off once answered (reader, then serve)
	w         writer                 // replies, in order, to the client

	need     int            // the length the unfinished request announced (reader only)
	over     int8           // the unfinished request's Exchange.Over: 0 not asked yet, 1 no, 2 yes (reader only)
	vec      [2][]byte      // the writer's scratch for a big reply
	batch    backend.Batch  // calls routed from the current read, not yet sent
	entered  *pool          // the pool enter counted this session in (reader only)
	counts   requestCounts  // requests read, not yet added to the pool's stats (reader only)
	staged   []*pending     // read and routed, not yet handed to the writer (reader only)
	watcher  *route.Watcher // set by a watch request: the session streams its lines (watch.go)
	free     []*pending     // written pendings to reuse (reader only; see newPending)
	pin      *pinState      // the client's transaction, if any (reader only; pin.go)
	sub      *subState      // the client's subscriptions, if any (pubsub.go)
	trk      *trackState    // the client's tracking, while on (reader only; tracking.go)
	unpinned bool           // the next request waits for the replies before it: a pin ended, a request went another way (reader only)
	blocked  blockedConns   // dedicated connections blocked for the client (pin.go)
	scripts  scriptConns    // connections running the client's scripts (scripts.go)
	line     partLine       // the request being cut into parts (reader only)
	env      localEnv       // a local command's env, while it is answered (reader only; clients.go)
	view     sessionView    // what CLIENT LIST shows of it (clients.go)
	readAt   time.Time      // when the current read arrived (reader only; observe.go)
	inLen    int            // the current read's buffer: its length (reader only; CLIENT LIST's qbuf)
	inFree   int            // and the room left in it
	arrived  int64          // when the kernel received the current read's bytes, Unix ns; 0: not known (reader only; readloop.go's stampOn)
	addr     string         // the client's address, once a record named it (writer only)

	// outstanding counts requests queued and not yet written; switchPool
	// waits for it to reach zero (see drainWait).
	outstanding atomic.Int64
	held        atomic.Int64 // reply bytes received, not yet written
	pipes       atomic.Int32 // pipes its replies hold (backend.Call.Pipes)
	partsOut    atomic.Int64 // parts of a request queued, not yet written (parts.go)
	waiting     atomic.Bool
	mu          sync.Mutex
	drained     *sync.Cond
	// pushGate guards pushEnded: the client left, and the invalidations
	// redirected to it while it has no tracking of its own (pushRaw) stop.
	pushGate  sync.Mutex
	pushEnded bool
}

var sessionIDs atomic.Uint32

func newSession(l *listener, p *pool, nc net.Conn) *session {
	s := &session{
		l:  l,
		p:  p,
		nc: nc,
		id: sessionIDs.Add(1),
	}
	s.setParser(p.dialect.NewRequestParser(p.limits))
	s.view.born = time.Now()
	s.tag = l.tagOf()
	s.drained = sync.NewCond(&s.mu)
	s.w.init(nc)
	return s
}

// enqueue stages p for the writer, which answers in order; pushStaged
// hands over a read's requests at once, before their calls go out. At
// maxPending requests in flight the reader waits (waitFor hands over what
// is staged and sends its calls first: the one it waits for may be among
// them).
func (s *session) enqueue(p *pending) {
	if s.outstanding.Load()+int64(len(s.staged)) >= maxPending {
		s.waitFor(func() bool { return s.outstanding.Load() < maxPending })
	}
	if p.Req.Part != codec.PartWhole {
		s.partsOut.Add(1)
	}
	s.staged = append(s.staged, p)
}

// pushStaged publishes the requests counted so far and hands the staged
// ones to the writer: once handed over, a request answered already may be
// written at once, and its client must find it counted.
func (s *session) pushStaged() {
	s.counts.publish()
	if len(s.staged) == 0 {
		return
	}
	s.outstanding.Add(int64(len(s.staged)))
	s.p.inflight.Add(int64(len(s.staged))) // staged requests are all s.p's (switchPool drains first)
	if s.sub != nil {
		s.sub.handOver(s.staged) // its messages take the protocol of the latest
	} else {
		s.push(s.staged)
	}
	if s.trk != nil { // its reads are tracked now: their calls have not gone out
		s.trk.handOver()
	}
	clear(s.staged)
	s.staged = s.staged[:0]
}

// written is called by the writer for the n pendings of a batch it is
// done with, after it released their held bytes.
func (s *session) written(n int) {
	if s.outstanding.Add(-int64(n)) >= 0 && s.waiting.Load() {
		s.mu.Lock()
		s.drained.Broadcast()
		s.mu.Unlock()
	}
}

// waitFor blocks the reader until done reports true; the writer wakes it
// after every reply it finishes.
func (s *session) waitFor(done func() bool) {
	s.pushStaged() // done counts them in outstanding; and they are counted
	if done() {
		return
	}
	s.batch.Flush() // what it waits for may be staged
	s.leave()       // a reload must not wait for this client
	s.waiting.Store(true)
	s.mu.Lock()
	for !done() && !s.closing.Load() {
		s.drained.Wait()
	}
	s.mu.Unlock()
	s.waiting.Store(false)
}

// drainWait blocks until every request queued so far has been answered.
func (s *session) drainWait() {
	s.waitFor(func() bool { return s.outstanding.Load() == 0 })
}

// heldWait blocks while the client has more than maxHeld reply bytes
// waiting to be written (backpressure on a client that does not read).
func (s *session) heldWait() {
	if s.held.Load() > maxHeld {
		s.waitFor(func() bool { return s.held.Load() <= maxHeld || s.outstanding.Load() == 0 })
	}
}

// serve runs the session until the client leaves or the server shuts down.
// The requests read before then are all answered (or dropped, when the
// client stopped reading) before the connection closes.
func (s *session) serve() {
	s.lastRead(s.readLoop())
	s.blocked.closeAll() // the client left: nothing will unblock them for it
	s.endSub()           // nor read its messages
	s.endTrack()         // nor its invalidations
	s.endPushes()        // nor those redirected to it
	s.view.gone.Store(true)
	s.quiesce()
	s.endPin(false)
	if s.watcher != nil {
		s.streamWatch()
	}
	s.w.stop()
	s.dropStock()
	if s.draining.Load() && !(s.passing && s.passOn()) {
		s.linger()
	}
	s.nc.Close()
}

// lastRead is called once a draining session's reader has read its last
// request, at a request boundary or not: the connection is to be handed
// off (handoff.go), or its last reply ends it (lastReply). A subscribed
// client or a watch is sent more after it, and a session stopping for
// another reason ends as before. A client with tracking on is not handed
// off either: the next process does not know what it read, and its
// connection closing tells it to drop its cache.
func (s *session) lastRead(boundary bool) {
	if s.passing || !s.draining.Load() || s.closing.Load() || s.sub != nil || s.watcher != nil || s.trk != nil {
		return
	}
	if boundary && s.canHandOff() {
		s.passing = true
		return
	}
	s.lastReply()
}

// maxBuffer bounds the read buffer: one whole request (line plus value).
func (s *session) maxBuffer() int {
	l := s.p.limits
	maxLine, maxValue := l.MaxLine, l.MaxValue
	if maxLine <= 0 {
		maxLine = 64 << 10
	}
	if maxValue <= 0 {
		maxValue = 1 << 20
	}
	return maxLine + maxValue + 4096
}

// parse handles every complete request in buf. It returns the unparsed
// rest, how many bytes after it must be dropped, and false when the session
// must stop reading.
//
// What ends a read is called in line, not deferred: with four defers and
// the loop's returns, Go did not open-code them, and their records were
// 2-3% of the proxy's user CPU per unpipelined request (perf). Nothing
// recovers a panic here; it ends the process.
func (s *session) parse(buf []byte) ([]byte, int64, bool) {
	s.readAt = time.Now() // one clock reading per read: its requests' start (observe.go), CLIENT LIST's idle
	s.batch.Start(s.readAt)
	s.inLen, s.inFree = len(buf), cap(buf)-len(buf)
	cmd := -1
	rest, drop, ok := s.parseAll(buf, &cmd)
	s.viewRead(&cmd, len(rest))
	s.pushStaged()  // counted, and with the writer, before any reply arrives
	s.batch.Flush() // every call routed from buf goes out, then leave
	s.leave()
	return rest, drop, ok
}

// parseAll is parse's loop over buf's requests; *cmd is the last one's
// command.
func (s *session) parseAll(buf []byte, cmd *int) ([]byte, int64, bool) {
	start := 0
	for start < len(buf) && !s.closing.Load() {
		p := s.nextPending()
		inPart := s.inPart()
		n, err := s.parseRequest(buf, start, p, inPart)
		if err != nil {
			if errors.Is(err, codec.ErrIncomplete) {
				s.need = codec.Needed(err)
				s.askOver()
				s.freePending(p)
				break
			}
			s.over = 0
			next, drop, ok := s.refuse(buf, start, p, err, inPart)
			if !ok {
				return nil, 0, false
			}
			if drop > 0 {
				return buf[:0], drop, true
			}
			start = next
			continue
		}
		start += n
		*cmd = p.Req.Cmd
		p.Over, s.over = s.over == 2, 0
		s.enter(p)
		if p.Req.Part != codec.PartMore { // a request cut into parts counts once
			s.counts.count(s.p.stats, p.Req.Name)
		}
		s.route(p)
		closeAfter, part := p.Req.Close, p.Req.Part // p belongs to the writer once queued
		s.enqueue(p)
		s.line.done(part)
		if closeAfter {
			s.closing.Store(true)
			return nil, 0, false
		}
		if s.watcher != nil { // no more requests: serve streams the watch
			return nil, 0, false
		}
	}
	rest := copy(buf, buf[start:])
	return buf[:rest], 0, true
}

// nextPending returns the pending for the next request, once the reader
// may take one: the last reply of a pin that just ended has arrived, and
// the session has moved to the pool a reload put on its listener.
func (s *session) nextPending() *pending {
	if s.unpinned {
		// The pin's last command (EXEC ...) must have run before a
		// shared connection carries the next one: it may read what the
		// transaction wrote.
		s.unpinned = false
		s.drainWait()
	}
	if cur := s.l.pool.Load(); cur != s.p && s.pin == nil && s.sub == nil && !s.inPart() {
		s.switchPool(cur)
	}
	p := s.newPending()
	p.pool = s.p
	p.sess = s
	p.readAt = s.readAt
	if s.need > bigRequest && cap(p.Req.Buf) < s.need {
		// A big request: the parser copies it into a recycled buffer.
		backend.PutBuffer(p.Req.Buf)
		p.Req.Buf = backend.GetBuffer(s.need)
	}
	return p
}

// askOver asks the pool's router, once per request that has begun to
// arrive and not ended, whether its buffers are full
// (route.BufferLimiter), as memcached's proxy asks when a command line
// arrives; the answer goes with the request (Exchange.Over), which the
// router applies only to a request with a value.
func (s *session) askOver() {
	if s.over != 0 || s.inPart() {
		return
	}
	s.over = 1
	if bl, ok := s.p.router.(route.BufferLimiter); ok && bl.OverBuffer() {
		s.over = 2
	}
}

// parseRequest parses the request at buf[start:] into p, or cuts a part
// of a long one, and waits for the client to read its replies before the
// reader takes it. inPart tells whether the parser was inside a request
// cut into parts.
func (s *session) parseRequest(buf []byte, start int, p *pending, inPart bool) (int, error) {
	if !inPart {
		// Wait for the client to read its replies before taking more
		// requests. Inside a request cut into parts, only once a part
		// is cut (see cutPart): its client may send all of it before
		// it reads.
		s.heldWait()
	}
	n, err := s.parser.ParseRequest(buf[start:], &p.Req)
	s.need = 0
	if errors.Is(err, codec.ErrIncomplete) && s.parts != nil {
		n, err = s.cutPart(buf, start, p, err)
	}
	switch {
	case err == nil && p.Req.Part != codec.PartWhole:
		s.partWait()
	case err == nil:
		s.heldWait()
	}
	return n, err
}

// refuse handles the request at buf[start:] that the parser rejected with
// err: a protocol error is routed on (a server must hear of it) or
// answered with its reply, in p. It returns where parsing resumes in buf,
// how many bytes after buf must be dropped, and false when the session
// must stop reading.
func (s *session) refuse(buf []byte, start int, p *pending, err error, inPart bool) (int, int64, bool) {
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) {
		s.freePending(p)
		return 0, 0, false
	}
	s.p.stats.ProtocolErrors.Add(1)
	if pe.Forward { // rejected, but a server must hear of it: routed as p.Req
		s.enter(p)
		s.counts.count(s.p.stats, p.Req.Name)
		s.route(p)
		s.enqueue(p)
	} else if !s.answerRefused(p, pe, inPart) {
		return 0, 0, false
	}
	start += pe.N
	if pe.Discard > 0 {
		d := min(pe.Discard, int64(len(buf)-start))
		start += int(d)
		if pe.Discard > d {
			return start, pe.Discard - d, true
		}
	}
	return start, 0, true
}

// answerRefused answers p, a request the parser refused with pe, with
// pe's reply, and returns false when that reply closes the connection.
func (s *session) answerRefused(p *pending, pe *codec.ProtocolError, inPart bool) bool {
	if pe.Reply != "" {
		s.noteRefused()
	}
	p.Req.Reset()
	p.Req.Close = pe.Close
	p.Req.Part = s.errorPart(inPart)
	p.Answer(append(p.Out(), pe.Reply...))
	s.enqueue(p)
	s.line.done(p.Req.Part)
	if pe.Close {
		s.closing.Store(true)
		return false
	}
	return true
}

// enter marks the session as routing with its pool, so that a reload does
// not close that pool's backends under it (retire waits for routing to
// drop to zero). If a reload swapped the pool meanwhile, the session
// switches first and routes p with the new pool. The session stays entered
// for the rest of its read (parse leaves at the end), and leaves before it
// waits for anything.
func (s *session) enter(p *pending) {
	for {
		if s.entered == nil {
			s.p.routing.Add(1)
			s.entered = s.p
		}
		cur := s.l.pool.Load()
		if cur == s.p || s.pin != nil || s.sub != nil || s.inPart() { // a pinned or subscribed client, or a line being cut, keeps its pool
			return
		}
		s.leave()
		s.switchPool(cur)
		p.pool = s.p
	}
}

// leave ends what enter began.
func (s *session) leave() {
	if s.entered != nil {
		s.entered.routing.Add(-1)
		s.entered = nil
	}
}

// switchPool moves the session to the pool a reload put on its listener.
// It first waits until every earlier request of the client is answered: the
// new pool may send the next request over another socket, or to another
// server, and it must not overtake an earlier one (a get passing the set
// before it). The parser is kept (with its state, such as a Redis AUTH)
// unless the protocol or the parser's options changed.
func (s *session) switchPool(cur *pool) {
	s.counts.publish()
	s.drainWait()
	if cur.dialect != s.p.dialect || !reflect.DeepEqual(cur.limits, s.p.limits) {
		s.setParser(cur.dialect.NewRequestParser(cur.limits))
	}
	s.p = cur
	s.tag = s.l.tagOf() // stored before cur: the pair a reload set
}

// route answers a local command itself and hands every other request,
// once the pool's limits admit it, to the pool's router.
func (s *session) route(p *pending) {
	pl := s.p
	if s.trk != nil {
		s.trk.note(p)
	}
	if p.Req.Route == codec.RouteWatch {
		s.startWatch(p)
		return
	}
	if s.sub != nil && s.routeSubscribed(p) {
		return
	}
	if p.Req.Route == codec.RouteSubscribe {
		s.routeSub(p)
		return
	}
	if o := pl.order; o != nil && o.Ordered() && p.Req.Route != codec.RouteBlock && p.Req.Route != codec.RouteLocal {
		o.WaitBefore(s.arrivedAt()) // the blocking commands read before p go first
	}
	if s.routeDedicated(p) {
		return
	}
	if p.Req.Route == codec.RouteLocal {
		s.routeLocal(p, pl)
		return
	}
	if pl.limits.ClusterView && s.moved(p, pl) {
		return
	}
	if (pl.paused.Load() != 0 || p.Req.Pause != codec.PauseNone) && s.routePaused(p, pl) {
		return
	}
	keys, ok := s.line.add(p)
	if !ok {
		return
	}
	if !s.admit(p, keys) {
		s.line.dead = p.Req.Part != codec.PartWhole
		return
	}
	if p.Req.WithLocal {
		s.addLocal(p, pl)
	}
	p.Hint = s.id
	p.Tag = s.tag
	p.Batch = &s.batch
	p.Pipes = nil
	if s.w.raw != nil {
		p.Pipes = &s.pipes
	}
	pl.router.Route(&p.Exchange)
}

// routeLocal answers a command the proxy answers itself, but a PING
// while a script runs, which goes to the script's server (pingBusy).
func (s *session) routeLocal(p *pending, pl *pool) {
	if p.Req.Script == codec.ScriptPing && s.pingBusy(p) {
		return
	}
	s.counts.publish() // its answer may show the requests before it, and itself
	s.appendLocal(p, pl)
}

// addLocal has the dialect add the proxy's part to a request for the
// servers (INFO's Proxy section), and applies what the proxy takes of
// it (CONFIG SET tracking-table-max-keys).
func (s *session) addLocal(p *pending, pl *pool) {
	if n, ok := resp.TrackingMaxKeys(&p.Req); ok {
		pl.srv.tracking.of(pl).setMax(n)
	}
	if la, ok := pl.dialect.(codec.LocalAdder); ok {
		s.counts.publish()
		la.AddLocal(&p.Req, pl)
	}
}

// admit applies the pool's limits to a request bound for servers. It
// answers a refused request itself and returns false.
// keys is the request's number of keys (with a part's, the keys of its
// request so far).
func (s *session) admit(p *pending, keys int) bool {
	cfg, st := s.p.cfg, s.p.stats
	var msg string
	kind := codec.ErrServer
	switch {
	case cfg.MaxKeys > 0 && keys > cfg.MaxKeys:
		kind, msg = codec.ErrClient, fmt.Sprintf("too many keys: %d, max_keys is %d", keys, cfg.MaxKeys)
	case cfg.ActiveReqLimit > 0 && st.Active.Load() >= int64(cfg.ActiveReqLimit):
		msg = "active request limit reached"
	case cfg.BufferMemoryLimit > 0 && st.Buffered.Load() >= int64(cfg.BufferMemoryLimit)<<10:
		msg = "buffer memory limit reached"
	}
	if msg != "" {
		st.LimitHits.Add(1)
		out := p.Out()
		if p.Req.Mode != codec.ModeNoreply {
			out = s.p.dialect.AppendError(out, kind, msg)
		}
		p.Answer(out)
		return false
	}
	if cfg.ActiveReqLimit > 0 || cfg.BufferMemoryLimit > 0 {
		p.counted = true
		st.Active.Add(1)
		st.Buffered.Add(int64(len(p.Req.Wire)))
	}
	return true
}

// release takes an answered request out of its pool's in-flight counts.
func release(p *pending) {
	if !p.counted {
		return
	}
	st := p.pool.stats
	st.Active.Add(-1)
	st.Buffered.Add(-(int64(len(p.Req.Wire)) + p.ReplyBytes()))
}

// bigRequest is the announced request size from which the parser copies a
// request into a recycled buffer of its own.
const bigRequest = 16 << 10

// appendReply appends what the client sees for p, in the words of the pool
// that routed it; each failed backend call counts as a forward error.
func (s *session) appendReply(out []byte, p *pending) []byte {
	out, failed := p.AppendReply(out, p.pool.dialect)
	if failed > 0 {
		p.pool.stats.ForwardError.Add(int64(failed))
	}
	return out
}

// stop makes the session stop reading new requests; the ones already read
// are answered, then the connection closes.
func (s *session) stop() {
	s.closing.Store(true)
	s.nc.SetReadDeadline(time.Now())
	s.mu.Lock()
	s.drained.Broadcast() // a reader waiting for its client to read
	s.mu.Unlock()
}

// outPool holds the write buffers of sessions between bursts.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, readChunk); return &b }}

// getOut returns an empty write buffer and its holder, for putOut: the
// holder goes back into the pool, so a batch allocates no slice header.
func getOut() (*[]byte, []byte) {
	h := outPool.Get().(*[]byte)
	return h, (*h)[:0]
}

// putOut returns b (grown from the buffer getOut gave with h) to the pool,
// unless it grew too big to keep.
func putOut(h *[]byte, b []byte) {
	if cap(b) <= 4*writeBatch {
		*h = b
		outPool.Put(h)
	}
}

// requestCounts are the pool's request counters (requests, and requests
// by command) for the requests of one read, added to the pool's stats
// once: every session adding to the same counters once per request kept
// their cache line moving between cores, 2-3% of the proxy's CPU with
// pipelined clients. They are published before any of those requests'
// replies can reach the client (see publish's callers), so a client that
// has a reply never reads a count without its request.
type requestCounts struct {
	stats *poolStats // the pool's counters, which cmds are of
	n     int64      // requests not yet added
	cmds  [4]commandCount
	ncmds int
}

// commandCount is a command's counter and the requests not yet added to it.
type commandCount struct {
	name string
	ctr  *atomic.Int64
	n    int64
}

// count counts one request of command name for st.
func (c *requestCounts) count(st *poolStats, name string) {
	if c.stats != st {
		c.publish()
		c.stats, c.ncmds = st, 0
	}
	c.n++
	for i := range c.cmds[:c.ncmds] {
		if c.cmds[i].name == name {
			c.cmds[i].n++
			return
		}
	}
	if c.ncmds == len(c.cmds) { // a fifth command: not kept
		st.command(name).Add(1)
		return
	}
	c.cmds[c.ncmds] = commandCount{name, st.command(name), 1}
	c.ncmds++
}

// publish adds the counts to the pool's stats.
func (c *requestCounts) publish() {
	if c.n == 0 {
		return
	}
	c.stats.Requests.Add(c.n)
	c.n = 0
	for i := range c.cmds[:c.ncmds] {
		if cc := &c.cmds[i]; cc.n > 0 {
			cc.ctr.Add(cc.n)
			cc.n = 0
		}
	}
}
