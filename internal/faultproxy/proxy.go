package faultproxy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// dialTimeout bounds the dial to the upstream for each accepted connection.
const dialTimeout = 2 * time.Second

// Proxy forwards connections from Addr to an upstream address through the
// toxics the test sets. See the package documentation.
type Proxy struct {
	upstream string
	addr     string

	mu        sync.Mutex
	ln        net.Listener // nil while stopped
	links     map[*link]struct{}
	toxics    [2]Toxic
	held      [2]chan struct{} // while a direction's toxic holds: closed when it stops
	slowClose time.Duration
	rng       *rand.Rand
	accepted  int64
	closed    bool
	gen       int // bumped by Stop: connections accepted before it die

	quit chan struct{} // closed by Close
	wg   sync.WaitGroup
}

// New starts a Proxy on 127.0.0.1 (a free port) that forwards to upstream
// ("host:port"). It fails the test if it cannot listen, and closes with the
// test. The upstream need not be up: a connection accepted while it is
// down is reset at once.
func New(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p, err := Listen(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// Listen is New for a program that is no test (soak): it returns why it
// cannot listen instead of failing a test, and the caller must Close the
// Proxy.
func Listen(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		upstream: upstream,
		addr:     ln.Addr().String(),
		links:    map[*link]struct{}{},
		rng:      rand.New(rand.NewPCG(1, 2)),
		quit:     make(chan struct{}),
	}
	p.serve(ln)
	return p, nil
}

// Addr returns the address clients dial, "127.0.0.1:PORT". It stays the
// same across Stop and Start.
func (p *Proxy) Addr() string { return p.addr }

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// serve makes ln the listener and starts its accept loop. Called with p.mu
// not held.
func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	gen := p.gen
	p.wg.Add(1)
	p.mu.Unlock()
	go p.accept(ln, gen)
}

func (p *Proxy) accept(ln net.Listener, gen int) {
	defer p.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-p.quit:
				return
			case <-time.After(5 * time.Millisecond): // EMFILE and the like
			}
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(nc.(*net.TCPConn), gen)
		}()
	}
}

// handle dials the upstream for a connection accepted by the listener of
// generation gen and runs the link.
func (p *Proxy) handle(client *net.TCPConn, gen int) {
	d := net.Dialer{Timeout: dialTimeout}
	nc, err := d.Dial("tcp", p.upstream)
	if err != nil {
		client.SetLinger(0)
		client.Close()
		return
	}
	l := newLink(p, client, nc.(*net.TCPConn))
	p.mu.Lock()
	if p.closed || p.gen != gen { // stopped while dialling
		p.mu.Unlock()
		l.teardown()
		return
	}
	p.links[l] = struct{}{}
	p.accepted++
	p.mu.Unlock()
	l.run()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// Stop closes the listener, so new connects are refused, and drops every
// connection: the backend died. It is a no-op while stopped.
func (p *Proxy) Stop() {
	p.mu.Lock()
	ln := p.ln
	p.ln = nil
	p.gen++
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.DropAll()
}

// Start listens on Addr again after Stop: the backend is back. It is a
// no-op while running. It fails if the port was taken meanwhile, or after
// Close.
func (p *Proxy) Start() error {
	p.mu.Lock()
	running, closed := p.ln != nil, p.closed
	p.mu.Unlock()
	if closed {
		return errors.New("faultproxy: start after close")
	}
	if running {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.serve(ln)
	return nil
}

// Running reports whether the listener accepts connections.
func (p *Proxy) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ln != nil
}

// DropAll closes every live connection, both ends, at once. The listener
// keeps accepting.
func (p *Proxy) DropAll() {
	for _, l := range p.live() {
		l.teardown()
	}
}

// ResetAll resets every live connection, both ends at once (SO_LINGER 0,
// then close: each peer gets a RST), and returns how many there were. The
// listener keeps accepting.
func (p *Proxy) ResetAll() int {
	links := p.live()
	for _, l := range links {
		l.reset()
	}
	return len(links)
}

// LoseAll makes every live connection lose its bytes from now on, in
// both directions, for the rest of its life, and returns how many there
// were: a path that died silently (a NAT or firewall that forgot the
// flow, a cable pulled) without a FIN or RST to either end. Unlike
// Blackhole it spares the connections accepted later. A close still
// passes, so that the test's ends can be torn down.
func (p *Proxy) LoseAll() int {
	links := p.live()
	for _, l := range links {
		l.lost.Store(true)
	}
	return len(links)
}

// InjectNow writes b into dir's stream of every live connection at once,
// between two chunks (a chunk being written is finished first), and
// returns how many connections took it. A receiver that takes nothing for
// a second is skipped. Unlike InjectAt it acts once, now, also on idle
// connections, and later connections never see it; Cut and Inject
// positions do not count its bytes.
func (p *Proxy) InjectNow(dir Direction, b []byte) int {
	n := 0
	for _, l := range p.live() {
		if l.injectNow(dir, b) == nil {
			n++
		}
	}
	return n
}

// live returns the live connections.
func (p *Proxy) live() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	return links
}

// Conns returns how many connections are live now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Accepted returns how many connections were accepted (and their upstream
// dialled) since New.
func (p *Proxy) Accepted() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Close stops the listener, closes every connection and waits until every
// goroutine of the Proxy has returned. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	close(p.quit)
	ln := p.ln
	p.ln = nil
	p.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	p.DropAll()
	p.wg.Wait()
}
