package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The verified clients of the upgrade tests: each keeps one connection,
// checks it before each request as pooled clients do (go-redis peeks at
// the socket: a connection the server closed while it was idle is dropped
// and a new one dialed, which is no failure), and reconnects after a
// failure. A request written that gets no reply is a failed request.

// errWrong is a reply that is not the one the request must get.
var errWrong = errors.New("wrong reply")

// step is one verified exchange of a client kind on c: nil, errWrong
// (wrapped), or the connection's error.
type step func(c *clientConn, key string, seq int) error

// clientConn is one client connection with a deadline per exchange.
type clientConn struct {
	nc  net.Conn
	r   *bufio.Reader
	got int // bytes read since the last send
}

func newClientConn(nc net.Conn) *clientConn {
	c := &clientConn{nc: nc}
	c.r = bufio.NewReader(readCounter{c})
	return c
}

// readCounter counts what c reads into c.got.
type readCounter struct{ c *clientConn }

func (r readCounter) Read(b []byte) (int, error) {
	n, err := r.c.nc.Read(b)
	r.c.got += n
	return n, err
}

func (c *clientConn) send(s string) error {
	c.got = c.r.Buffered()
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	_, err := io.WriteString(c.nc, s)
	return err
}

func (c *clientConn) line() (string, error) {
	l, err := c.r.ReadString('\n')
	if err != nil {
		return l, err
	}
	return strings.TrimSuffix(l, "\r\n"), nil
}

// data reads n bytes and their CRLF.
func (c *clientConn) data(n int) (string, error) {
	buf := make([]byte, n+2)
	_, err := io.ReadFull(c.r, buf)
	return string(buf[:n]), err
}

// peerClosed reports whether the server has closed the connection: a
// peek that does not wait, as go-redis's pool does before reusing one.
func (c *clientConn) peerClosed() bool {
	sc, ok := c.nc.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := false
	var b [1]byte
	raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || err != nil && err != syscall.EAGAIN
		return true
	})
	return closed
}

// want fails with errWrong unless got is want.
func want(what, got, want string) error {
	if got != want {
		return fmt.Errorf("%w: %s: %q, want %q", errWrong, what, got, want)
	}
	return nil
}

// textStep sets key with the memcached text protocol and gets it back.
func textStep(c *clientConn, key string, seq int) error {
	val := key + ":" + strconv.Itoa(seq)
	if err := c.send(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(val), val, key)); err != nil {
		return err
	}
	l, err := c.line()
	if err != nil {
		return err
	}
	if err := want("set", l, "STORED"); err != nil {
		return err
	}
	if l, err = c.line(); err != nil {
		return err
	}
	if err := want("get", l, fmt.Sprintf("VALUE %s 0 %d", key, len(val))); err != nil {
		return err
	}
	got, err := c.data(len(val))
	if err != nil {
		return err
	}
	if l, err = c.line(); err != nil {
		return err
	}
	return errors.Join(want("value", got, val), want("end", l, "END"))
}

// metaStep is textStep with the meta commands.
func metaStep(c *clientConn, key string, seq int) error {
	val := key + ":" + strconv.Itoa(seq)
	if err := c.send(fmt.Sprintf("ms %s %d\r\n%s\r\nmg %s v\r\n", key, len(val), val, key)); err != nil {
		return err
	}
	l, err := c.line()
	if err != nil {
		return err
	}
	if err := want("ms", l, "HD"); err != nil {
		return err
	}
	if l, err = c.line(); err != nil {
		return err
	}
	if err := want("mg", l, fmt.Sprintf("VA %d", len(val))); err != nil {
		return err
	}
	got, err := c.data(len(val))
	if err != nil {
		return err
	}
	return want("value", got, val)
}

// resp reads one RESP reply as text: a simple line as it is, a bulk string
// as its value, an array as its elements joined by spaces.
func (c *clientConn) resp() (string, error) {
	l, err := c.line()
	if err != nil || l == "" {
		return l, err
	}
	switch l[0] {
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "(nil)", nil
		}
		return c.data(n)
	case '*':
		n, _ := strconv.Atoi(l[1:])
		var parts []string
		for range n {
			p, err := c.resp()
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, " "), nil
	}
	return l, nil
}

func command(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += "$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	return s
}

// redisSteps sends cmds and checks each reply against wants.
func redisSteps(c *clientConn, cmds []string, wants []string) error {
	if err := c.send(strings.Join(cmds, "")); err != nil {
		return err
	}
	for i, w := range wants {
		got, err := c.resp()
		if err != nil {
			return err
		}
		if err := want(fmt.Sprintf("reply %d", i), got, w); err != nil {
			return err
		}
	}
	return nil
}

// redisStep sets key with SET and gets it back.
func redisStep(c *clientConn, key string, seq int) error {
	val := key + ":" + strconv.Itoa(seq)
	return redisSteps(c, []string{command("SET", key, val), command("GET", key)}, []string{"+OK", val})
}

// txStep sets and gets key in a transaction, sent one command at a time
// as a client waits for each QUEUED.
func txStep(c *clientConn, key string, seq int) error {
	val := key + ":" + strconv.Itoa(seq)
	for _, s := range []struct{ cmd, want string }{
		{command("MULTI"), "+OK"},
		{command("SET", key, val), "+QUEUED"},
		{command("GET", key), "+QUEUED"},
		{command("EXEC"), "+OK " + val},
	} {
		if err := redisSteps(c, []string{s.cmd}, []string{s.want}); err != nil {
			return err
		}
	}
	return nil
}

// clientLoad runs verified clients until end and counts what they saw:
// failed counts the requests that got no reply because the connection
// closed (or broke) after they were written; cut those among them whose
// reply had begun.
type clientLoad struct {
	ok, wrong, failed, cut, refused, closedIdle atomic.Int64
	mu                                          sync.Mutex
	firstBad                                    []string // the first few wrong or failed exchanges
	stop                                        chan struct{}
	wg                                          sync.WaitGroup
}

func newClientLoad() *clientLoad { return &clientLoad{stop: make(chan struct{})} }

func (l *clientLoad) bad(n *atomic.Int64, what string) {
	n.Add(1)
	l.mu.Lock()
	if len(l.firstBad) < 5 {
		l.firstBad = append(l.firstBad, what)
	}
	l.mu.Unlock()
}

// start runs n clients of one kind against network addr.
func (l *clientLoad) start(n int, network, addr, kind string, st step) {
	for i := range n {
		l.wg.Add(1)
		go l.client(network, addr, fmt.Sprintf("%s%d", kind, i), st)
	}
}

func (l *clientLoad) client(network, addr, name string, st step) {
	defer l.wg.Done()
	var c *clientConn
	defer func() {
		if c != nil {
			c.nc.Close()
		}
	}()
	for seq := 0; ; seq++ {
		select {
		case <-l.stop:
			return
		default:
		}
		if c != nil && c.peerClosed() {
			l.closedIdle.Add(1)
			c.nc.Close()
			c = nil
		}
		if c == nil {
			nc, err := net.DialTimeout(network, addr, 2*time.Second)
			if err != nil {
				l.bad(&l.refused, fmt.Sprintf("%s: dial: %v", name, err))
				time.Sleep(10 * time.Millisecond)
				continue
			}
			c = newClientConn(nc)
		}
		err := st(c, fmt.Sprintf("%s-k%d", name, seq%100), seq)
		switch {
		case err == nil:
			l.ok.Add(1)
		case errors.Is(err, errWrong):
			l.bad(&l.wrong, fmt.Sprintf("%s: %v", name, err))
		default:
			if c.got > 0 {
				l.cut.Add(1)
			}
			l.bad(&l.failed, fmt.Sprintf("%s: %v", name, err))
			c.nc.Close()
			c = nil
		}
	}
}

func (l *clientLoad) end() {
	close(l.stop)
	l.wg.Wait()
}

func (l *clientLoad) String() string {
	return fmt.Sprintf("ok %d, wrong %d, failed %d (reply begun: %d), refused %d, closed while idle %d",
		l.ok.Load(), l.wrong.Load(), l.failed.Load(), l.cut.Load(), l.refused.Load(), l.closedIdle.Load())
}

// startGoRedis runs n goroutines sharing one go-redis client (its pool, its
// default retries) that set and get their keys: what an application using
// that library sees of an upgrade. Its errors count as failed.
func (l *clientLoad) startGoRedis(n int, addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: n})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer wg.Done()
			ctx := context.Background()
			for seq := 0; ; seq++ {
				select {
				case <-l.stop:
					return
				default:
				}
				key := fmt.Sprintf("goredis%d-k%d", i, seq%100)
				val := key + ":" + strconv.Itoa(seq)
				if err := rdb.Set(ctx, key, val, 0).Err(); err != nil {
					l.bad(&l.failed, fmt.Sprintf("go-redis SET %s: %v", key, err))
					continue
				}
				switch got, err := rdb.Get(ctx, key).Result(); {
				case err != nil:
					l.bad(&l.failed, fmt.Sprintf("go-redis GET %s: %v", key, err))
				case got != val:
					l.bad(&l.wrong, fmt.Sprintf("go-redis GET %s: %q, want %q", key, got, val))
				default:
					l.ok.Add(1)
				}
			}
		}()
	}
	go func() {
		wg.Wait()
		rdb.Close()
	}()
}
