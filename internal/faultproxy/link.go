package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// chunkSize is the most one read of a direction takes.
const chunkSize = 32 << 10

// link is one proxied connection: the accepted client end and the dialled
// upstream end, with a pump goroutine per direction.
type link struct {
	p        *Proxy
	client   *net.TCPConn
	upstream *net.TCPConn
	done     chan struct{} // closed by teardown
	once     sync.Once
	wmu      [2]sync.Mutex // per direction: one writer at a time (the pump, InjectNow)
	lost     atomic.Bool   // LoseAll: every byte is dropped, both ways
}

func newLink(p *Proxy, client, upstream *net.TCPConn) *link {
	return &link{p: p, client: client, upstream: upstream, done: make(chan struct{})}
}

// ends returns where dir's bytes come from and go to.
func (l *link) ends(dir Direction) (src, dst *net.TCPConn) {
	if dir == Downstream {
		return l.upstream, l.client
	}
	return l.client, l.upstream
}

// run pumps both directions until both end, then closes both ends.
func (l *link) run() {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.pump(Upstream)
	}()
	l.pump(Downstream)
	wg.Wait()
	l.teardown()
}

// teardown closes both ends and wakes every sleeping pump. Only the first
// call of teardown or reset acts.
func (l *link) teardown() { l.end(false) }

// reset is teardown with a RST to both peers.
func (l *link) reset() { l.end(true) }

func (l *link) end(rst bool) {
	l.once.Do(func() {
		close(l.done)
		if rst {
			l.client.SetLinger(0)
			l.upstream.SetLinger(0)
		}
		l.client.Close()
		l.upstream.Close()
	})
}

// injectNow writes b to the receiving end of dir between two chunks.
func (l *link) injectNow(dir Direction, b []byte) error {
	_, dst := l.ends(dir)
	l.wmu[dir].Lock()
	defer l.wmu[dir].Unlock()
	dst.SetWriteDeadline(time.Now().Add(time.Second))
	_, err := dst.Write(b)
	dst.SetWriteDeadline(time.Time{})
	return err
}

// waitHeld waits while dir's toxic holds; it reports whether the link is
// still up.
func (l *link) waitHeld(dir Direction) bool {
	for {
		held := l.p.holding(dir)
		if held == nil {
			return true
		}
		select {
		case <-held:
		case <-l.done:
			return false
		}
	}
}

// sleep waits d, or less when the link is torn down; it reports whether
// the link is still up.
func (l *link) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

// stream is one direction's position, for Cut and Inject.
type stream struct {
	sent     int64 // bytes written to the receiving end, injected ones included
	read     int64 // bytes read from the sending end and not dropped
	cut      *Cut  // the Cut this stream last saw, and sent at that moment
	cutBase  int64
	inject   *Inject // the Inject this stream last saw, and read at that moment
	injBase  int64
	injected bool
}

// outcome is what forwarding one chunk led to.
type outcome uint8

const (
	forwarded outcome = iota
	cutDone           // the toxic's Cut ended the link
	broken            // the receiving end is gone or the link is torn down
)

// pump moves dir's bytes until the sending end closes or the link breaks.
func (l *link) pump(dir Direction) {
	src, dst := l.ends(dir)
	var st stream
	buf := make([]byte, chunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch l.forward(dir, &st, buf[:n], time.Now(), dst) {
			case cutDone:
				return
			case broken:
				l.drain(src)
				return
			}
		}
		if err != nil {
			l.passClose(dst, err)
			return
		}
	}
}

// drain reads and drops src's bytes until it ends: what a process does
// with a peer it cannot answer any more.
func (l *link) drain(src *net.TCPConn) {
	buf := make([]byte, chunkSize)
	for {
		if _, err := src.Read(buf); err != nil {
			return
		}
	}
}

// passClose tells dst that its peer closed (FIN) or failed (RST), after
// the slow-close delay.
func (l *link) passClose(dst *net.TCPConn, err error) {
	if errors.Is(err, net.ErrClosed) { // torn down
		return
	}
	l.p.mu.Lock()
	delay := l.p.slowClose
	l.p.mu.Unlock()
	if !l.sleep(delay) {
		return
	}
	if errors.Is(err, io.EOF) {
		dst.CloseWrite()
		return
	}
	dst.SetLinger(0)
	dst.Close()
}

// forward applies dir's toxic to one chunk read at readAt and writes it.
func (l *link) forward(dir Direction, st *stream, data []byte, readAt time.Time, dst *net.TCPConn) outcome {
	if !l.waitHeld(dir) {
		return broken
	}
	t, delay := l.p.snapshot(dir)
	if t.Blackhole || l.lost.Load() {
		return forwarded
	}
	if !l.sleep(time.Until(readAt.Add(delay))) {
		return broken
	}
	st.follow(&t)
	out := st.injectInto(data, t.Inject)
	out, cutNow := st.cutShort(out, t.Cut)
	if len(out) > 0 {
		l.wmu[dir].Lock()
		err := l.write(dst, out, &t)
		l.wmu[dir].Unlock()
		if err != nil && !cutNow {
			return broken
		}
		st.sent += int64(len(out))
	}
	if cutNow {
		l.cut(dir, t.Cut)
		return cutDone
	}
	return forwarded
}

// follow takes t's Cut and Inject as the stream's own when they changed:
// a new one counts from the bytes sent or read by now.
func (st *stream) follow(t *Toxic) {
	if t.Cut != st.cut {
		st.cut, st.cutBase = t.Cut, st.sent
	}
	if t.Inject != st.inject {
		st.inject, st.injBase, st.injected = t.Inject, st.read, false
	}
}

// injectInto counts data as read and returns it with in's bytes inserted
// when their place falls in it, once per Inject.
func (st *stream) injectInto(data []byte, in *Inject) []byte {
	out := data
	if in != nil && !st.injected {
		if pos := in.At - (st.read - st.injBase); pos <= int64(len(data)) {
			// One write, as if the garbage came in the same segment.
			out = make([]byte, 0, len(data)+len(in.Bytes))
			out = append(append(append(out, data[:pos]...), in.Bytes...), data[pos:]...)
			st.injected = true
		}
	}
	st.read += int64(len(data))
	return out
}

// cutShort returns out shortened to what c lets through, and whether c
// ends the stream with it.
func (st *stream) cutShort(out []byte, c *Cut) ([]byte, bool) {
	if c == nil {
		return out, false
	}
	if left := c.After - (st.sent - st.cutBase); left <= int64(len(out)) {
		return out[:max(left, 0)], true
	}
	return out, false
}

// errTornDown reports a write interrupted because the link went away.
var errTornDown = errors.New("faultproxy: link torn down")

// write writes b to dst in slices and at the rate t asks for.
func (l *link) write(dst *net.TCPConn, b []byte, t *Toxic) error {
	piece := len(b)
	if t.Slice > 0 {
		piece = min(piece, t.Slice)
	}
	if t.Rate > 0 {
		piece = min(piece, max(1, t.Rate/50)) // about 20 ms of data a write
	}
	for len(b) > 0 {
		n := min(piece, len(b))
		if _, err := dst.Write(b[:n]); err != nil {
			return err
		}
		b = b[n:]
		var pause time.Duration
		if t.Rate > 0 {
			pause = time.Duration(n) * time.Second / time.Duration(t.Rate)
		}
		if t.Slice > 0 {
			pause += t.SliceDelay
		}
		if !l.sleep(pause) {
			return errTornDown
		}
	}
	return nil
}

// cut ends the link for c: the receiving end of dir gets a FIN or a RST,
// the sending end is closed. With a FIN the other direction keeps being
// read (and dropped) until the receiver closes too.
func (l *link) cut(dir Direction, c *Cut) {
	src, dst := l.ends(dir)
	if c.Reset {
		dst.SetLinger(0)
		dst.Close()
	} else {
		dst.CloseWrite()
	}
	src.Close()
}
