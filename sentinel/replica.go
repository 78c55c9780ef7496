package sentinel

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Prober checks that servers are replicas fit to serve reads: ROLE says
// "slave" and the replica's link to its master is "connected" (what INFO
// replication calls master_link_status:up). It keeps one idle connection
// per address between checks. Safe for concurrent use; checks of one
// address at the same time each use a connection of their own.
type Prober struct {
	auth    Auth
	tls     *tls.Config
	timeout time.Duration

	mu     sync.Mutex
	idle   map[string]*conn
	closed bool
}

// NewProber returns a Prober that reaches servers with auth and tc (nil:
// plain) and bounds each dial and request by timeout (DefaultTimeout when
// not > 0).
func NewProber(auth Auth, tc *tls.Config, timeout time.Duration) *Prober {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Prober{auth: auth, tls: tc, timeout: timeout, idle: map[string]*conn{}}
}

// CheckReplica asks addr for ROLE. It returns nil for a replica whose link
// to its master is up, and otherwise the cause: the dial's or the
// request's error, a *ReplyError, ErrNotReplica (a master, a Sentinel), or
// ErrLinkDown (a replica still connecting to or syncing with its master,
// or one whose master is gone).
func (p *Prober) CheckReplica(addr string) error {
	c, err := p.take(addr)
	if err != nil {
		return err
	}
	v, err := c.do(p.timeout, "ROLE")
	if err != nil {
		c.close()
		return err
	}
	p.give(addr, c)
	return replicaState(v)
}

// replicaState reads a ROLE reply as CheckReplica reports it. A replica's
// is ["slave", master ip, master port, state, offset].
func replicaState(v value) error {
	if err := v.err(); err != nil {
		return err
	}
	role, ok := v.arrayHead()
	switch {
	case !ok:
		return badReply("ROLE: want an array starting with the role")
	case role != "slave":
		return fmt.Errorf("%w: it is a %.32s", ErrNotReplica, role)
	case len(v.arr) < 4 || !v.arr[3].isString():
		return badReply("ROLE: want a replica's link state")
	case v.arr[3].str != "connected":
		return fmt.Errorf("%w: link state %.32s", ErrLinkDown, v.arr[3].str)
	}
	return nil
}

// take returns addr's idle connection, or a new one.
func (p *Prober) take(addr string) (*conn, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	c := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	return dial(addr, p.auth, p.tls, p.timeout)
}

// give keeps c as addr's idle connection, unless one is kept already or
// the Prober is closed.
func (p *Prober) give(addr string, c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.idle[addr] != nil {
		c.close()
		return
	}
	p.idle[addr] = c
}

// Forget closes addr's idle connection: the address is no longer checked.
func (p *Prober) Forget(addr string) {
	p.mu.Lock()
	c := p.idle[addr]
	delete(p.idle, addr)
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// Close closes the idle connections; later checks fail with ErrClosed.
func (p *Prober) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = map[string]*conn{}, true
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// replicas asks a Sentinel for name's replicas (SENTINEL REPLICAS) and
// returns the addresses of those it does not think down or disconnected,
// sorted.
func (c *conn) replicas(name string, timeout time.Duration) ([]string, error) {
	v, err := c.do(timeout, "SENTINEL", "REPLICAS", name)
	if err != nil {
		return nil, err
	}
	return parseReplicas(v)
}

// parseReplicas reads a SENTINEL REPLICAS reply: an array of flat
// field/value arrays (name, ip, port, flags, ...).
func parseReplicas(v value) ([]string, error) {
	if err := v.err(); err != nil {
		return nil, err
	}
	if v.kind != '*' || v.null {
		return nil, badReply("SENTINEL REPLICAS: want an array")
	}
	var out []string
	for _, r := range v.arr {
		f, ok := r.strings()
		if !ok || len(f)%2 != 0 {
			return nil, badReply("SENTINEL REPLICAS: want field/value arrays")
		}
		var ip, port, flags string
		for i := 0; i < len(f); i += 2 {
			switch f[i] {
			case "ip":
				ip = f[i+1]
			case "port":
				port = f[i+1]
			case "flags":
				flags = f[i+1]
			}
		}
		if replicaDown(flags) {
			continue
		}
		addr, err := joinAddr(ip, port)
		if err != nil {
			return nil, err
		}
		out = append(out, addr)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// replicaDown reports whether a replica's Sentinel flags say it is down
// or unreachable.
func replicaDown(flags string) bool {
	for f := range strings.SplitSeq(flags, ",") {
		switch f {
		case "s_down", "o_down", "disconnected":
			return true
		}
	}
	return false
}
