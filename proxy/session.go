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
	p       *pool // the pool the reader routes with; reloads change it
	nc      net.Conn
	id      uint32
	parser  codec.RequestParser
	closing atomic.Bool // stop reading: shutdown or a fatal protocol error
	w       writer      // replies, in order, to the client

	targets []int         // scratch for routing multi-key requests
	need    int           // the length the unfinished request announced (reader only)
	vec     [2][]byte     // the writer's scratch for a big reply
	batch   backend.Batch // calls routed from the current read, not yet sent
	entered *pool         // the pool enter counted this session in (reader only)
	counts  requestCounts // requests read, not yet added to the pool's stats (reader only)
	staged  []*pending    // read and routed, not yet handed to the writer (reader only)
	free    []*pending    // written pendings to reuse (reader only; see newPending)

	// outstanding counts requests queued and not yet written; switchPool
	// waits for it to reach zero (see drainWait).
	outstanding atomic.Int64
	held        atomic.Int64 // reply bytes received, not yet written
	waiting     atomic.Bool
	mu          sync.Mutex
	drained     *sync.Cond
}

var sessionIDs atomic.Uint32

func newSession(l *listener, p *pool, nc net.Conn) *session {
	s := &session{
		l:      l,
		p:      p,
		nc:     nc,
		id:     sessionIDs.Add(1),
		parser: p.dialect.NewRequestParser(p.limits),
	}
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
	s.push(s.staged)
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
	s.readLoop()
	s.quiesce()
	s.w.stop()
	s.dropStock()
	s.nc.Close()
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
func (s *session) parse(buf []byte) ([]byte, int64, bool) {
	defer s.leave()
	defer s.batch.Flush() // every call routed from buf goes out, then leave
	defer s.pushStaged()  // counted, and with the writer, before any reply arrives
	start := 0
	for start < len(buf) && !s.closing.Load() {
		s.heldWait()
		if cur := s.l.pool.Load(); cur != s.p {
			s.switchPool(cur)
		}
		p := s.newPending()
		p.pool = s.p
		p.sess = s
		if s.need > bigWrite && cap(p.req.Buf) < s.need {
			// A big request: the parser copies it into a recycled buffer.
			backend.PutBuffer(p.req.Buf)
			p.req.Buf = backend.GetBuffer(s.need)
		}
		n, err := s.parser.ParseRequest(buf[start:], &p.req)
		s.need = 0
		if err != nil {
			if errors.Is(err, codec.ErrIncomplete) {
				s.need = codec.Needed(err)
				s.freePending(p)
				break
			}
			var pe *codec.ProtocolError
			if !errors.As(err, &pe) {
				s.freePending(p)
				return nil, 0, false
			}
			s.p.stats.ProtocolErrors.Add(1)
			p.req.Reset()
			p.out = append(p.out, pe.Reply...)
			p.req.Close = pe.Close
			p.complete()
			s.enqueue(p)
			if pe.Close {
				s.closing.Store(true)
				return nil, 0, false
			}
			start += pe.N
			if rest := int64(len(buf) - start); pe.Discard > 0 {
				d := min(pe.Discard, rest)
				start += int(d)
				if pe.Discard > d {
					return buf[:0], pe.Discard - d, true
				}
			}
			continue
		}
		start += n
		s.enter(p)
		s.counts.count(s.p.stats, p.req.Name)
		if p.req.Route == codec.RouteLocal || s.p.router != nil {
			s.counts.publish() // its answer may come at once, and may show them
		}
		s.route(p)
		closeAfter := p.req.Close // p belongs to the writer once queued
		s.enqueue(p)
		if closeAfter {
			s.closing.Store(true)
			return nil, 0, false
		}
	}
	rest := copy(buf, buf[start:])
	return buf[:rest], 0, true
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
		if cur == s.p {
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
		s.parser = cur.dialect.NewRequestParser(cur.limits)
	}
	s.p = cur
}

// route answers p locally or sends it to its backend(s).
func (s *session) route(p *pending) {
	req := &p.req
	pl := s.p
	if req.Route != codec.RouteLocal && !s.admit(p) {
		return
	}
	if pl.router != nil && req.Route != codec.RouteLocal {
		pl.router.Route(req, s.id, p)
		return
	}
	switch req.Route {
	case codec.RouteLocal:
		p.out = pl.dialect.AppendLocal(p.out, req, pl)
		p.complete()
	case codec.RouteKey:
		s.routeKey(p)
	case codec.RouteMulti:
		s.routeMulti(p)
	case codec.RouteSame:
		s.routeSame(p)
	case codec.RouteAny:
		p.left.Store(1)
		p.call.Req = req
		p.call.Done = p.doneFn
		pl.backends[int(s.id)%len(pl.backends)].Stage(&p.call, s.id, &s.batch)
	case codec.RouteAll:
		p.subs, p.owners = p.subs[:0], nil
		for range pl.backends {
			p.subs = append(p.subs, req)
		}
		s.fanOut(p, nil)
	default:
		p.out = pl.dialect.AppendError(p.out, codec.ErrServer, "unroutable request")
		p.complete()
	}
}

// admit applies the pool's limits to a request bound for servers. It
// answers a refused request itself and returns false.
func (s *session) admit(p *pending) bool {
	cfg, st := s.p.cfg, s.p.stats
	var msg string
	kind := codec.ErrServer
	switch {
	case cfg.MaxKeys > 0 && len(p.req.Keys) > cfg.MaxKeys:
		kind, msg = codec.ErrClient, fmt.Sprintf("too many keys: %d, max_keys is %d", len(p.req.Keys), cfg.MaxKeys)
	case cfg.ActiveReqLimit > 0 && st.Active.Load() >= int64(cfg.ActiveReqLimit):
		msg = "active request limit reached"
	case cfg.BufferMemoryLimit > 0 && st.Buffered.Load() >= int64(cfg.BufferMemoryLimit)<<10:
		msg = "buffer memory limit reached"
	}
	if msg != "" {
		st.LimitHits.Add(1)
		if p.req.Mode != codec.ModeNoreply {
			p.out = s.p.dialect.AppendError(p.out, kind, msg)
		}
		p.complete()
		return false
	}
	if cfg.ActiveReqLimit > 0 || cfg.BufferMemoryLimit > 0 {
		p.counted = true
		st.Active.Add(1)
		st.Buffered.Add(int64(len(p.req.Wire)))
	}
	return true
}

// release takes an answered request out of its pool's in-flight counts.
func release(p *pending) {
	if !p.counted {
		return
	}
	st := p.pool.stats
	n := int64(len(p.req.Wire)) + int64(len(p.call.Reply.Raw))
	for i := range p.calls {
		n += int64(len(p.calls[i].Reply.Raw))
	}
	st.Active.Add(-1)
	st.Buffered.Add(-n)
}

func (s *session) routeKey(p *pending) {
	idx, err := s.p.pick(p.req.Keys[0])
	if err != nil {
		s.failLocal(p, err)
		return
	}
	p.left.Store(1)
	p.call.Req = &p.req
	p.call.Done = p.doneFn
	s.p.backend(idx).Stage(&p.call, s.id, &s.batch)
}

func (s *session) routeMulti(p *pending) {
	req := &p.req
	s.targets = s.targets[:0]
	same := true
	for _, k := range req.Keys {
		idx, err := s.p.pick(k)
		if err != nil {
			s.failLocal(p, err)
			return
		}
		if len(s.targets) > 0 && idx != s.targets[0] {
			same = false
		}
		s.targets = append(s.targets, idx)
	}
	if same { // every key on one server: no need to split
		p.left.Store(1)
		p.call.Req = req
		p.call.Done = p.doneFn
		s.p.backend(s.targets[0]).Stage(&p.call, s.id, &s.batch)
		return
	}
	subs, subTargets, owners := s.p.dialect.Split(req, s.targets, &p.split)
	p.subs, p.owners = append(p.subs[:0], subs...), owners
	s.p.stats.Fragments.Add(int64(len(subs)))
	s.fanOut(p, subTargets)
}

// routeSame sends p to the one backend that owns every key, or refuses it.
func (s *session) routeSame(p *pending) {
	target := -1
	for _, k := range p.req.Keys {
		idx, err := s.p.pick(k)
		if err != nil {
			s.failLocal(p, err)
			return
		}
		if target >= 0 && idx != target {
			s.p.stats.ForwardError.Add(1)
			p.out = s.p.dialect.AppendError(p.out, codec.ErrCrossServer,
				"keys in request don't hash to the same server")
			p.complete()
			return
		}
		target = idx
	}
	if target < 0 {
		target = int(s.id) % len(s.p.backends)
	}
	p.left.Store(1)
	p.call.Req = &p.req
	p.call.Done = p.doneFn
	s.p.backend(target).Stage(&p.call, s.id, &s.batch)
}

// fanOut sends p.subs[i] to backend targets[i] (or to backend i when targets
// is nil).
func (s *session) fanOut(p *pending, targets []int) {
	n := len(p.subs)
	if cap(p.calls) < n {
		p.calls = make([]backend.Call, n)
	}
	p.calls = p.calls[:n]
	p.left.Store(int32(n))
	for i, sub := range p.subs {
		b := s.p.backends[i%len(s.p.backends)]
		if targets != nil {
			b = s.p.backend(targets[i])
		}
		c := &p.calls[i]
		c.Req = sub
		c.Done = p.doneFn
		b.Stage(c, s.id, &s.batch)
	}
}

func (s *session) failLocal(p *pending, err error) {
	s.p.stats.ForwardError.Add(1)
	if p.req.Mode != codec.ModeNoreply {
		p.out = s.p.dialect.AppendError(p.out, codec.ErrServer, err.Error())
	}
	p.complete()
}

// bigWrite is the reply size from which the writer sends a backend's reply
// from its own buffer instead of copying it into the batch.
const bigWrite = 16 << 10

// bigReply returns p's reply when it is big enough to be worth writing
// without copying, and can be: codec.Dialect passes a ModeNormal reply
// through as it is, and a codec.BigReplier says what goes around the data
// of a ModeRewrite one. out gets what goes before the data; tail is what
// follows it.
func bigReply(out []byte, p *pending) (head, big []byte, tail string) {
	r := &p.call.Reply
	if len(p.subs) > 0 || p.call.Req == nil || r.Err != nil || len(r.Raw) < bigWrite {
		return out, nil, ""
	}
	switch p.req.Mode {
	case codec.ModeNormal:
		return out, r.Raw, ""
	case codec.ModeRewrite:
		if br, ok := p.pool.dialect.(codec.BigReplier); ok {
			return br.AppendReplyHead(out, &p.req, r.Raw, r.Kind)
		}
	}
	return out, nil, ""
}

// appendReply appends what the client sees for p, in the words of the pool
// that routed it.
func (s *session) appendReply(out []byte, p *pending) []byte {
	d := p.pool.dialect
	req := &p.req
	switch {
	case len(p.subs) > 0:
		p.replies = p.replies[:0]
		for i := range p.calls {
			p.replies = append(p.replies, p.calls[i].Reply)
			if p.calls[i].Reply.Err != nil {
				p.pool.stats.ForwardError.Add(1)
			}
		}
		if req.Mode == codec.ModeNoreply {
			return out
		}
		return d.Merge(out, req, p.subs, p.owners, p.replies)
	case p.call.Req != nil:
		r := p.call.Reply
		if r.Err != nil {
			p.pool.stats.ForwardError.Add(1)
			if req.Mode == codec.ModeNoreply {
				return out
			}
			return d.AppendError(out, codec.ErrServer, r.Err.Error())
		}
		return d.AppendReply(out, req, r.Raw, r.Kind)
	default:
		return append(out, p.out...)
	}
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
