package main

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"syscall"
	"time"
)

// op is one request of a batch. Its keys are w.keys[k0:k0+n].
type op struct {
	set bool
	k0  int
	n   int
	ver uint32 // a set's version
}

// counters are one connection's tallies; the run adds them up at the end.
// Requests, sets, gets, keys, hits and misses count the measured part only;
// errors and reconnects count every phase.
type counters struct {
	Requests   int64 `json:"requests"`
	Sets       int64 `json:"sets"`
	Gets       int64 `json:"gets"`
	KeysRead   int64 `json:"keys_read"`
	Hits       int64 `json:"hits"`
	Misses     int64 `json:"misses"`
	Errors     int64 `json:"errors"`
	Reconnects int64 `json:"reconnects"`
	// Answered counts every reply read, warm-up and prefill included:
	// what a server's own command count should show for the run.
	Answered int64 `json:"answered"`
}

func (c *counters) add(o counters) {
	c.Requests += o.Requests
	c.Sets += o.Sets
	c.Gets += o.Gets
	c.KeysRead += o.KeysRead
	c.Answered += o.Answered
	c.Hits += o.Hits
	c.Misses += o.Misses
	c.Errors += o.Errors
	c.Reconnects += o.Reconnects
}

// worker drives one connection from one goroutine: it writes a batch of
// requests in one write, then reads and checks their replies in order.
type worker struct {
	g     *loadgen
	id    int
	proto protocol
	conn  net.Conn
	br    *bufio.Reader
	rng   *rand.Rand
	dead  bool // the connection broke and could not be redialed

	// The batch being built and read; all reused from batch to batch.
	wbuf  []byte
	ops   []op
	keys  []int32  // key indexes of the batch's ops
	acked []bool   // per keys entry: a set was acknowledged before the get was sent
	names [][]byte // the names of the keys of the get being read
	hits  []bool   // per names entry: found in the reply
	lat   []int64  // measured latencies of the batch, in ns

	measuring bool  // the batch is measured
	cur       op    // the get being read, for onHit
	hitErr    error // first wrong value of the get being read
	hitFn     func(int, []byte)

	deadline time.Time       // the connection's read and write deadline
	raw      syscall.RawConn // conn's, for send
	st       counters
	late     [1]int64 // with -rate: how late the batch started after a sleep, ns
}

func newWorker(g *loadgen, id int) *worker {
	w := &worker{
		g:     g,
		id:    id,
		proto: protocols[g.cfg.Proto](),
		rng:   rand.New(rand.NewPCG(g.cfg.Seed, uint64(id))),
	}
	w.hitFn = w.onHit
	return w
}

// dial connects the worker's socket.
func (w *worker) dial() error {
	conn, err := net.DialTimeout("tcp", w.g.cfg.Addr, w.g.cfg.Timeout)
	if err != nil {
		return err
	}
	w.conn = conn
	w.raw = nil
	if sc, ok := conn.(syscall.Conn); ok {
		w.raw, _ = sc.SyscallConn()
	}
	w.br = bufio.NewReaderSize(newReader(conn, w.raw), readBufferSize)
	w.deadline = time.Time{}
	return nil
}

// send writes the batch and returns once the first reply bytes can be
// read. Reading at once, as net.Conn's Read does, would only see EAGAIN:
// the server has not answered yet. That wasted read per batch is CPU a
// load generator takes from the server it measures on a small machine
// (redis-benchmark, an event loop, does not make it).
//
// The write happens inside RawConn.Read's callback: the poller forgets
// readiness when Read starts, so a reply that came before it would leave
// nothing to wait for; written inside, the reply can only come after. A
// write the socket does not take whole is finished by the blocking
// net.Conn path.
func (w *worker) send() error {
	if w.raw == nil {
		_, err := w.conn.Write(w.wbuf)
		return err
	}
	written, waited := 0, false
	var werr error
	err := w.raw.Read(func(fd uintptr) bool {
		if waited {
			return true // readable
		}
		for written < len(w.wbuf) {
			n, err := rawWrite(int(fd), w.wbuf[written:])
			if err == syscall.EINTR {
				continue
			}
			if err != 0 {
				if err != syscall.EAGAIN {
					werr = os.NewSyscallError("write", err)
				}
				return true
			}
			written += n
		}
		waited = true
		return false
	})
	switch {
	case werr != nil:
		return werr
	case written < len(w.wbuf):
		_, err := w.conn.Write(w.wbuf[written:])
		return err
	case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
		return err
	}
	return nil // a deadline now shows in the read that follows
}

// close closes the socket.
func (w *worker) close() {
	if w.conn != nil {
		_ = w.conn.Close()
	}
}

// prefill sets every key of keys once, depth keys per batch.
func (w *worker) prefill(keys []int, depth int) {
	for len(keys) > 0 && !w.dead && !w.g.stopped() {
		n := min(depth, len(keys))
		w.reset()
		for _, k := range keys[:n] {
			w.addSet(k)
		}
		keys = keys[n:]
		w.exchange(time.Now(), false)
	}
}

// load runs the load phase until the duration or the request quota is used
// up, the run is stopped, or the connection is lost.
func (w *worker) load() {
	cfg, g := w.g.cfg, w.g
	quota := g.quota(w.id)
	var next time.Time
	if g.interval > 0 { // spread the connections' schedules over one interval
		next = g.loadStart.Add(g.interval * time.Duration(w.id) / time.Duration(cfg.Conns))
	}
	for !w.dead && !g.stopped() {
		start := time.Now()
		slept := false
		if g.interval > 0 {
			if next.After(start) {
				time.Sleep(next.Sub(start))
				slept = true
			}
			start, next = next, next.Add(g.interval) // latency counts from the schedule
		}
		measured := !start.Before(g.measureFrom)
		if measured && slept {
			w.late[0] = int64(time.Since(start))
			g.lateRec.record(w.id, w.late[:])
		}
		n := cfg.Pipeline
		switch {
		case cfg.Requests > 0 && measured:
			if quota == 0 {
				return
			}
			n = int(min(int64(n), quota))
			quota -= int64(n)
		case cfg.Requests == 0 && !start.Before(g.stopAt):
			return
		}
		w.reset()
		for range n {
			w.addLoadOp()
		}
		w.exchange(start, measured)
	}
}

// reset empties the batch.
func (w *worker) reset() {
	w.wbuf, w.ops, w.keys, w.acked, w.lat = w.wbuf[:0], w.ops[:0], w.keys[:0], w.acked[:0], w.lat[:0]
}

// addLoadOp adds a set or a get, as the ratio says, to the batch.
func (w *worker) addLoadOp() {
	cfg := w.g.cfg
	if cfg.getWeight == 0 || (cfg.setWeight > 0 && w.rng.IntN(cfg.setWeight+cfg.getWeight) < cfg.setWeight) {
		w.addSet(w.g.dist.next(w.rng))
		return
	}
	ks := w.g.ks
	k0 := len(w.keys)
	if cfg.MGet == 1 {
		w.keys = append(w.keys, int32(w.g.dist.next(w.rng)))
	} else {
		w.keys = append(w.keys, make([]int32, cfg.MGet)...)
		pickDistinct(w.g.dist, w.rng, ks.len(), w.keys[k0:])
	}
	w.names = w.names[:0]
	for _, k := range w.keys[k0:] {
		w.acked = append(w.acked, ks.isAcked(int(k)))
		w.names = append(w.names, ks.names[k])
	}
	w.ops = append(w.ops, op{k0: k0, n: cfg.MGet})
	w.wbuf = w.proto.appendGet(w.wbuf, w.names)
}

// addSet adds a set of the next version of key k to the batch.
func (w *worker) addSet(k int) {
	ks := w.g.ks
	ver := ks.nextVersion(k)
	w.ops = append(w.ops, op{set: true, k0: len(w.keys), n: 1, ver: ver})
	w.keys = append(w.keys, int32(k))
	w.acked = append(w.acked, false)
	w.wbuf = w.proto.appendSetHead(w.wbuf, ks.names[k], ks.size)
	w.wbuf = ks.appendValue(w.wbuf, k, ver)
	w.wbuf = append(w.wbuf, "\r\n"...)
}

// exchange writes the batch, reads and checks every reply, and records the
// latencies when measured. A broken stream fails the rest of the batch and
// redials.
func (w *worker) exchange(start time.Time, measured bool) {
	w.measuring = measured
	w.refreshDeadline()
	if err := w.send(); err != nil {
		w.broken(0, fmt.Errorf("write: %w", err))
		return
	}
	for i := range w.ops {
		err := w.readReply(&w.ops[i])
		if measured {
			w.lat = append(w.lat, int64(time.Since(start)))
		}
		if err != nil && !isReplyError(err) {
			w.broken(i, err)
			return
		}
		w.st.Answered++
		if err != nil {
			w.st.Errors++
			w.g.errs.add(w.id, err)
		}
		if measured {
			w.count(&w.ops[i])
		}
	}
	if measured {
		w.g.rec.record(w.id, w.lat)
	}
}

// count tallies a measured request.
func (w *worker) count(o *op) {
	w.st.Requests++
	if o.set {
		w.st.Sets++
	} else {
		w.st.Gets++
		w.st.KeysRead += int64(o.n)
	}
}

// refreshDeadline moves the socket's deadline timeout ahead, but only when
// half of it has passed: setting it on every batch costs CPU for nothing.
func (w *worker) refreshDeadline() {
	now := time.Now()
	if w.deadline.Sub(now) > w.g.cfg.Timeout/2 {
		return
	}
	w.deadline = now.Add(w.g.cfg.Timeout)
	_ = w.conn.SetDeadline(w.deadline)
}

// readReply reads and checks the reply to o. It returns nil, a *replyError
// (wrong reply, stream in step) or a broken-stream error.
func (w *worker) readReply(o *op) error {
	ks := w.g.ks
	if o.set {
		k := int(w.keys[o.k0])
		err := w.proto.readSet(w.br)
		if err == nil {
			ks.ack(k)
		} else if isReplyError(err) {
			err = &replyError{msg: fmt.Sprintf("set %s: %v", ks.names[k], err)}
		}
		return err
	}
	keys := w.keys[o.k0 : o.k0+o.n]
	w.names = w.names[:0]
	for _, k := range keys {
		w.names = append(w.names, ks.names[k])
	}
	w.hits = append(w.hits[:0], make([]bool, o.n)...)
	w.cur, w.hitErr = *o, nil
	err := w.proto.readGet(w.br, w.names, w.hitFn)
	switch {
	case err != nil && !isReplyError(err):
		return err
	case err != nil:
		return &replyError{msg: fmt.Sprintf("get %s: %v", ks.names[keys[0]], err)}
	case w.hitErr != nil:
		return w.hitErr
	}
	var miss error
	for pos, hit := range w.hits {
		switch {
		case hit:
		case w.acked[o.k0+pos]:
			if miss == nil {
				miss = &replyError{msg: fmt.Sprintf("get %s: miss after an acknowledged set", ks.names[keys[pos]])}
			}
		case w.measuring:
			w.st.Misses++
		}
	}
	return miss
}

// onHit checks a value found by the get being read.
func (w *worker) onHit(pos int, value []byte) {
	if pos >= w.cur.n || w.hits[pos] {
		if w.hitErr == nil {
			w.hitErr = &replyError{msg: fmt.Sprintf("get: key at position %d answered twice", pos)}
		}
		return
	}
	w.hits[pos] = true
	if w.measuring {
		w.st.Hits++
	}
	if err := w.g.ks.check(int(w.keys[w.cur.k0+pos]), value); err != nil && w.hitErr == nil {
		w.hitErr = &replyError{msg: "get: " + err.Error()}
	}
}

// broken handles a stream that cannot be trusted: ops i.. of the batch count
// as wrong, and the connection is redialed (or, failing that, given up).
func (w *worker) broken(i int, err error) {
	w.st.Errors += int64(len(w.ops) - i)
	w.g.errs.add(w.id, fmt.Errorf("%w (%d requests of the batch unanswered)", err, len(w.ops)-i))
	w.close()
	deadline := time.Now().Add(w.g.cfg.Timeout)
	for {
		time.Sleep(50 * time.Millisecond)
		if w.g.stopped() {
			w.dead = true
			return
		}
		if err = w.dial(); err == nil {
			w.st.Reconnects++
			return
		}
		if time.Now().After(deadline) {
			w.dead = true
			w.g.errs.add(w.id, fmt.Errorf("connection given up: %w", err))
			return
		}
	}
}
