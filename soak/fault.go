package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// faultProxy forwards TCP connections from its listener to target and
// injects faults on command: added latency, a blackhole (nothing moves, in
// either direction, new connections included, until it ends), reset of
// every open connection, and garbage written to the client side (the proxy
// under test reads it as a server reply).
type faultProxy struct {
	ln     net.Listener
	target string

	latency   atomic.Int64 // ns added before forwarding each chunk
	blackhole atomic.Bool

	mu    sync.Mutex
	conns map[*faultConn]struct{}
	wg    sync.WaitGroup
}

type faultConn struct {
	client, server net.Conn
	wmu            sync.Mutex // serializes writes to client
}

func newFaultProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{ln: ln, target: target, conns: map[*faultConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *faultProxy) serve(c net.Conn) {
	defer p.wg.Done()
	p.waitBlackhole()
	s, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	fc := &faultConn{client: c, server: s}
	p.mu.Lock()
	p.conns[fc] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { p.pipe(s, c, nil); done <- struct{}{} }()
	go func() { p.pipe(c, s, &fc.wmu); done <- struct{}{} }()
	<-done
	c.Close()
	s.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, fc)
	p.mu.Unlock()
}

// pipe copies src to dst, applying latency and blackhole per chunk. A
// chunk read while a fault is on is held, never dropped: TCP does not lose
// bytes in the middle of a stream.
func (p *faultProxy) pipe(dst, src net.Conn, wmu *sync.Mutex) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.waitBlackhole()
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			if wmu != nil {
				wmu.Lock()
			}
			_, werr := dst.Write(buf[:n])
			if wmu != nil {
				wmu.Unlock()
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (p *faultProxy) waitBlackhole() {
	for p.blackhole.Load() {
		time.Sleep(10 * time.Millisecond)
	}
}

// resetAll closes every open connection with RST on both sides.
func (p *faultProxy) resetAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for fc := range p.conns {
		for _, c := range []net.Conn{fc.client, fc.server} {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetLinger(0)
			}
			c.Close()
		}
	}
	return len(p.conns)
}

// garbage writes bytes that are no valid memcached or RESP reply to every
// open connection's client side, between two forwarded chunks.
func (p *faultProxy) garbage() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for fc := range p.conns {
		fc.wmu.Lock()
		fc.client.SetWriteDeadline(time.Now().Add(time.Second))
		fc.client.Write([]byte("\x00\xffGARBAGE\x01 not a reply\r\n"))
		fc.client.SetWriteDeadline(time.Time{})
		fc.wmu.Unlock()
	}
	return len(p.conns)
}

func (p *faultProxy) Close() {
	p.ln.Close()
	p.blackhole.Store(false)
	p.latency.Store(0)
	p.resetAll()
	p.wg.Wait()
}
