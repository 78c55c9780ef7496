package proxy_test

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	fp "shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// flapCauses are the causes a request may fail with while its server
// flaps: the socket dies (disconnected, reading, writing), a connect is
// refused or its handshake is cut (connecting, readvalidate), a reply is
// late (timeout), or the server is marked bad. A desync cause (parsing,
// trailingdata, badvalidate) would mean replies got mixed up.
var flapCauses = []string{"disconnected", "reading", "writing", "connecting", "readvalidate", "timeout", "markedbad"}

// classify names what a reply to gets of keys was: "hit", a failure cause,
// or "" for a wrong reply.
func classify(got string, keys ...string) string {
	if got == multiHit(keys...) {
		return "hit"
	}
	for _, c := range flapCauses {
		if got == backendFailure(c) {
			return c
		}
	}
	return ""
}

// TestFaultFlapping stops and starts server A every 100 ms (each stop
// drops its connections) while three clients pipeline gets of A's keys
// and multi-gets over A and B, and the config is reloaded halfway. Every
// request gets exactly one reply, in order: its own value or a failure
// naming a cause; B's clients see no failure; A's keys work again once A
// stays up.
func TestFaultFlapping(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newFaultRig(t, nil, "  server_failure_limit: 2\n  server_retry_timeout: 100\n")
	r.fill()
	by := r.watch(2)

	stop := make(chan struct{})
	var flaps sync.WaitGroup
	var startErr error
	stops := 0
	flaps.Add(1)
	go func() {
		defer flaps.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				startErr = r.fp.Start()
				return
			case <-tick.C:
			}
			if r.fp.Running() {
				r.fp.Stop()
				stops++
			} else if err := r.fp.Start(); err != nil {
				startErr = err
				return
			}
		}
	}()

	var mu sync.Mutex
	outcomes := map[string]int{}
	var wrong []string
	var clients sync.WaitGroup
	for ci := range 3 {
		c := dial(t, r.addr)
		clients.Add(1)
		go func() {
			defer clients.Done()
			a, b := r.keysA, r.keysB
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				// Five gets of A's keys and a multi-get over A and B.
				var reqs [][]string
				for i := range 5 {
					reqs = append(reqs, []string{a[(ci+round+i)%len(a)]})
				}
				reqs = append(reqs, []string{a[round%len(a)], b[round%len(b)]})
				var pipe strings.Builder
				for _, keys := range reqs {
					pipe.WriteString("get " + strings.Join(keys, " ") + "\r\n")
				}
				if _, err := c.nc.Write([]byte(pipe.String())); err != nil {
					mu.Lock()
					wrong = append(wrong, "write: "+err.Error())
					mu.Unlock()
					return
				}
				for _, keys := range reqs {
					got, err := c.tryReply()
					kind := classify(got, keys...)
					mu.Lock()
					outcomes[kind]++
					if kind == "" || err != nil {
						wrong = append(wrong, fmt.Sprintf("get %v: %q, %v", keys, got, err))
					}
					mu.Unlock()
					if err != nil {
						return
					}
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	r.reload(fmt.Sprintf("  timeout: %d\n", (faultTimeout + 100*time.Millisecond).Milliseconds()))
	time.Sleep(800 * time.Millisecond)
	close(stop)
	flaps.Wait()
	clients.Wait()
	if startErr != nil {
		t.Fatalf("restart the fault proxy: %v", startErr)
	}
	by.check(t)

	c := dial(t, r.addr)
	for _, k := range r.keysA {
		waitHit(t, c, k, 2*time.Second)
	}
	var summary []string
	for k, n := range outcomes {
		summary = append(summary, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(summary)
	t.Logf("flapping server (%d stops, %d connections): %s", stops, r.fp.Accepted(), strings.Join(summary, " "))
	for _, w := range wrong[:min(len(wrong), 10)] {
		t.Error(w)
	}
	if outcomes["hit"] == 0 || outcomes["hit"] == sum(outcomes) {
		t.Fatalf("the flapping was not seen: %v", outcomes)
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// twoFaultServers starts two memcached, each behind a fault proxy, and a
// proxy for pool "mc" over the fault proxies with opts; it returns the
// fault proxies, each one's keys, and the pool's YAML for a given opts.
func twoFaultServers(t *testing.T, opts string) (fps [2]*fp.Proxy, keys [2][]string, yaml func(string) string, addr string) {
	t.Helper()
	for i := range fps {
		fps[i] = fp.New(t, testserver.StartMemcached(t).Addr)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	yaml = func(opts string) string {
		return fmt.Sprintf("mc:\n  listen: %s\n%s  servers:\n    - %s:1\n    - %s:1\n",
			addr, mergeOpts(faultDefaults(), opts), fps[0].Addr(), fps[1].Addr())
	}
	ks := keysFor(t, []string{fps[0].Addr(), fps[1].Addr()}, 4)
	keys = [2][]string{ks[fps[0].Addr()], ks[fps[1].Addr()]}
	return fps, keys, yaml, addr
}

// TestFaultAllDown stops every server of a pool. Requests fail fast
// naming the cause (connecting, then markedbad once the failure limit is
// reached, or with auto_eject_hosts the pool's "all servers ejected"); the
// close of the proxy's idle sockets is no failure (no request was hurt), so
// each server needs two failed connects; a reload that replaces the
// backends starts their count afresh; when the servers return, requests
// succeed again without a restart of the proxy.
func TestFaultAllDown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, tc := range []struct {
		name string
		opts string
		// want are the replies to get a0, get b0, get a0 b0, get a1, get b1
		// once both servers are down.
		want []string
	}{
		{"no eject", "  server_failure_limit: 2\n  server_retry_timeout: 300\n", []string{
			backendFailure("connecting"), backendFailure("connecting"), backendFailure("connecting"),
			backendFailure("markedbad"), backendFailure("markedbad"),
		}},
		{"eject fail_fast", "  server_failure_limit: 2\n  server_retry_timeout: 300\n  auto_eject_hosts: true\n  eject_policy: fail_fast\n", []string{
			backendFailure("connecting"), backendFailure("connecting"), backendFailure("connecting"),
			backendFailure("markedbad"), backendFailure("markedbad"),
		}},
		{"eject remap", "  server_failure_limit: 2\n  server_retry_timeout: 300\n  auto_eject_hosts: true\n", []string{
			// a0, b0: first failures; a0 b0: second failures, both ejected.
			backendFailure("connecting"), backendFailure("connecting"), backendFailure("connecting"),
			"SERVER_ERROR sharding: all servers ejected\r\n", "SERVER_ERROR sharding: all servers ejected\r\n",
		}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			fps, keys, yaml, addr := twoFaultServers(t, tc.opts)
			srv := startFaultProxy(t, yaml(tc.opts))
			a, b := keys[0], keys[1]
			c := dial(t, addr)
			for _, k := range append(append([]string(nil), a...), b...) {
				if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(value(k)), value(k))); got != "STORED\r\n" {
					t.Fatalf("set %s: %q", k, got)
				}
			}
			fps[0].Stop()
			fps[1].Stop()
			// Wait until the proxy has seen both sockets close, so that
			// every request below dials.
			waitSockets(t, srv, 0)
			reqs := []string{"get " + a[0], "get " + b[0], "get " + a[0] + " " + b[0], "get " + a[1], "get " + b[1]}
			for i, req := range reqs {
				start := time.Now()
				got := c.do(req + "\r\n")
				if took := time.Since(start); took > faultTimeout/2 {
					t.Errorf("%s with every server down took %v: not fast", req, took)
				}
				if got != tc.want[i] {
					t.Errorf("%s with every server down: %q, want %q", req, got, tc.want[i])
				}
			}
			// A reload with new server options replaces both backends: their
			// failure counts and bad marks start afresh.
			newOpts := tc.opts + fmt.Sprintf("  timeout: %d\n", (faultTimeout+100*time.Millisecond).Milliseconds())
			if err := srv.Reload(parseFaultYAML(t, yaml(newOpts))); err != nil {
				t.Fatal(err)
			}
			if got := c.do("get " + a[2] + "\r\n"); got != backendFailure("connecting") {
				t.Errorf("after a reload with every server down: %q, want a fresh connect attempt", got)
			}
			for _, f := range fps {
				if err := f.Start(); err != nil {
					t.Fatal(err)
				}
			}
			for _, k := range append(append([]string(nil), a...), b...) {
				waitHit(t, c, k, 3*time.Second)
			}
			if got, want := c.do("get "+a[0]+" "+b[0]+"\r\n"), multiHit(a[0], b[0]); got != want {
				t.Errorf("multi-get after the servers returned: %q, want %q", got, want)
			}
		})
	}
}

// TestFaultDNS gives servers as host names. One that does not resolve
// (nonexistent.invalid, reserved never to resolve) fails its keys fast
// with "connecting" while the one named localhost serves. Then a reload
// keeps both servers' names (so their keys stay put) but swaps the hosts:
// the name that resolved stops resolving, and the other one starts.
func TestFaultDNS(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mcA, mcB := testserver.StartMemcached(t), testserver.StartMemcached(t)
	port := testserver.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	yaml := func(hostA, hostB string) string {
		return fmt.Sprintf("mc:\n  listen: %s\n%s  servers:\n    - %s:%d:1 cache-a\n    - %s:%d:1 cache-b\n",
			addr, faultDefaults(), hostA, mcA.Port, hostB, mcB.Port)
	}
	srv := startFaultProxy(t, yaml("localhost", "nonexistent.invalid"))
	keys := keysFor(t, []string{"cache-a", "cache-b"}, 3)
	a, b := keys["cache-a"], keys["cache-b"]
	c := dial(t, addr)
	set := func(k string) string {
		return c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(value(k)), value(k)))
	}
	expect := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	timed := func(req string) string {
		t.Helper()
		start := time.Now()
		got := c.do(req)
		if took := time.Since(start); took > faultTimeout {
			t.Errorf("%q took %v: a name that does not resolve must fail within the connect timeout", req, took)
		}
		return got
	}

	expect("set on localhost", set(a[0]), "STORED\r\n")
	expect("get on localhost", c.do("get "+a[0]+"\r\n"), hit(a[0]))
	expect("set on a name that does not resolve", timed(fmt.Sprintf("set %s 0 0 1\r\nx\r\n", b[0])), backendFailure("connecting"))
	expect("get on a name that does not resolve", timed("get "+b[0]+"\r\n"), backendFailure("connecting"))
	expect("multi-get over both", timed("get "+a[0]+" "+b[0]+"\r\n"), backendFailure("connecting"))
	expect("localhost still serves", c.do("get "+a[0]+"\r\n"), hit(a[0]))

	if err := srv.Reload(parseFaultYAML(t, yaml("nonexistent.invalid", "localhost"))); err != nil {
		t.Fatal(err)
	}
	expect("get after cache-a's name stopped resolving", timed("get "+a[0]+"\r\n"), backendFailure("connecting"))
	expect("set on cache-b, resolving now", set(b[1]), "STORED\r\n")
	expect("get on cache-b", c.do("get "+b[1]+"\r\n"), hit(b[1]))
	// The keys stayed with their server's name: b[1] is on mcB itself.
	if v, ok := direct(t, mcB.Addr, b[1]); !ok || v != value(b[1]) {
		t.Errorf("%s is not on cache-b's server: %q, %v", b[1], v, ok)
	}
	if _, err := net.LookupHost("nonexistent.invalid"); err == nil {
		t.Error("nonexistent.invalid resolves on this machine: the test proves nothing")
	}
}

// waitSockets polls until every server of the first pool has want sockets.
func waitSockets(t *testing.T, srv *proxy.Server, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := true
		for _, ss := range srv.Stats().Pools[0].Servers {
			ok = ok && ss.ServerConnections == want
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers' sockets: %+v, want %d each", srv.Stats().Pools[0].Servers, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
