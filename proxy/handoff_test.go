package proxy_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// handOffRig is a proxy (old) whose drain hands its connections to a
// second one (next) serving the same listening socket, as an upgrade in
// place does across two processes. next starts with the drain, so the
// clients of a test connect to old.
type handOffRig struct {
	old, next *proxy.Server
	fp        *faultproxy.Proxy
	addr      string
	yaml      string
	bound     net.Listener // old's listening socket
}

func newHandOffRig(t *testing.T, p drainProto) *handOffRig {
	t.Helper()
	r := &handOffRig{fp: faultproxy.New(t, p.start(t).Addr)}
	r.addr = fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	r.yaml = fmt.Sprintf("d:\n  listen: %s\n%s  timeout: 30000\n  servers:\n    - %s:1\n", r.addr, p.poolOpts, r.fp.Addr())
	r.old = runProxy(t, parseFaultYAML(t, r.yaml), proxy.Options{Listen: func(network, addr string) (net.Listener, error) {
		ln, err := proxy.Bind(network, addr)
		r.bound = ln
		return ln, err
	}})
	return r
}

// startNext starts the new proxy on a duplicate of old's listening socket
// and has old's drains hand their connections to it.
func (r *handOffRig) startNext(t *testing.T) {
	t.Helper()
	r.next = runProxy(t, parseFaultYAML(t, r.yaml), proxy.Options{Listen: func(string, string) (net.Listener, error) {
		f, err := r.bound.(*net.TCPListener).File()
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return net.FileListener(f)
	}})
	r.old.SetHandOff(func(hc proxy.HandedConn) error {
		f, err := hc.Conn.(*net.TCPConn).File()
		if err != nil {
			return err
		}
		nc, err := net.FileConn(f)
		f.Close()
		if err != nil {
			return err
		}
		if err := r.next.Adopt(hc.Network, hc.Addr, nc, hc.State); err != nil {
			nc.Close()
			return err
		}
		return nil
	})
}

// drain starts the new proxy and drains the old one on a goroutine; its
// report comes on the channel.
func (r *handOffRig) drain(t *testing.T) <-chan proxy.DrainReport {
	t.Helper()
	r.startNext(t)
	done := make(chan proxy.DrainReport, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rep, err := r.old.Drain(ctx)
		if err != nil {
			t.Errorf("Drain: %v", err)
		}
		done <- rep
	}()
	return done
}

// TestHandOff drains a proxy that hands its connections over, with one
// client idle and one with requests in flight (their replies held at the
// backend): neither connection closes; the requests in flight are
// answered by the old proxy and the next ones, sent on the same
// connections, by the new.
func TestHandOff(t *testing.T) {
	for _, p := range drainProtos {
		t.Run(p.name, func(t *testing.T) {
			r := newHandOffRig(t, p)
			idle := rawDial(t, r.addr)
			idle.send(p.set)
			idle.expect(p.setReply, false)
			waitFor(t, 10*time.Second, "the idle client on the old proxy", func() bool {
				return r.old.Stats().CurrConnections == 1
			})
			r.fp.Hold(faultproxy.Downstream, true)
			busy := rawDial(t, r.addr)
			busy.send(p.get + p.get)
			waitFor(t, 10*time.Second, "the gets read", func() bool { return requestsRead(r.old) >= 3 })

			done := r.drain(t)
			waitFor(t, 10*time.Second, "the idle connection handed over", func() bool {
				return r.next.Stats().CurrConnections == 1
			})
			busy.send(p.get) // read by the new proxy, after the old one's replies
			r.fp.Hold(faultproxy.Downstream, false)
			busy.expect(p.getReply+p.getReply+p.getReply, false)
			idle.send(p.get)
			idle.expect(p.getReply, false)

			rep := <-done
			if rep.Connections != 2 || rep.Handed != 2 || rep.Drained != 0 || rep.Cut != 0 {
				t.Errorf("report %+v: want both connections handed over", rep)
			}
			if st := r.old.Stats().Drain; st.ConnectionsHanded != 2 || st.ConnectionsDrained != 0 {
				t.Errorf("DrainStats %+v", st)
			}
			if got := requestsRead(r.next); got != 2 {
				t.Errorf("the new proxy read %d requests, want the 2 sent after the hand-over", got)
			}
			if n := r.next.Stats().CurrConnections; n != 2 {
				t.Errorf("the new proxy serves %d connections, want 2", n)
			}
		})
	}
}

// TestHandOffRedisState hands over Redis connections with state: a RESP3
// client with a name keeps both, a client inside a transaction is handed
// over once its EXEC is answered, and a subscribed client is closed as
// any drain closes it.
func TestHandOffRedisState(t *testing.T) {
	r := newHandOffRig(t, drainProtos[1])
	named := rawDial(t, r.addr)
	named.send(multibulk("HELLO", "3", "SETNAME", "app"))
	readHello(named)
	tx := rawDial(t, r.addr)
	tx.send(multibulk("MULTI") + multibulk("SET", "k", "v"))
	tx.expect("+OK\r\n+QUEUED\r\n", false)
	sub := rawDial(t, r.addr)
	sub.send(multibulk("SUBSCRIBE", "ch"))
	sub.expect("*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n", false)
	waitFor(t, 10*time.Second, "three connections", func() bool { return r.old.Stats().CurrConnections == 3 })

	done := r.drain(t)
	sub.expect("", true)
	waitFor(t, 10*time.Second, "the named client handed over", func() bool {
		return r.next.Stats().CurrConnections == 1
	})
	named.send(multibulk("CLIENT", "GETNAME") + multibulk("GET", "missing"))
	named.expect("$3\r\napp\r\n_\r\n", false) // RESP3's null
	tx.send(multibulk("EXEC"))
	tx.expect("*1\r\n+OK\r\n", false)
	tx.send(multibulk("GET", "k"))
	tx.expect("$1\r\nv\r\n", false)
	rep := <-done
	if rep.Handed != 2 || rep.Drained != 1 {
		t.Errorf("report %+v: want 2 handed over, the subscriber drained", rep)
	}
	if n := r.next.Stats().CurrConnections; n != 2 {
		t.Errorf("the new proxy serves %d connections, want 2", n)
	}
}

// readHello reads HELLO 3's reply on c, a map whose fields vary by
// version: the one read holds it whole (nothing else was sent).
func readHello(c *rawConn) {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	var b [4096]byte
	n, err := c.nc.Read(b[:])
	if err != nil || n == 0 || b[0] != '%' {
		c.t.Fatalf("HELLO 3: %q, %v", b[:n], err)
	}
}

// TestAdoptRefused checks that Adopt refuses a connection for an address
// it does not listen on and one of another protocol.
func TestAdoptRefused(t *testing.T) {
	r := newHandOffRig(t, drainProtos[0])
	r.startNext(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if err := r.next.Adopt("tcp", "127.0.0.1:1", a, []byte("memcache\x00")); err == nil {
		t.Errorf("adopted a connection of an address not listened on")
	}
	if err := r.next.Adopt("tcp", r.addr, a, []byte("redis\x00\x01\x00\x00xxxxxxxx")); err == nil {
		t.Errorf("adopted a Redis connection on a memcache listener")
	}
}
