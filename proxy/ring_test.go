package proxy_test

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// ringRig is a ring pool "mc" over three servers named s0, s1, s2, s1
// behind a fault proxy, served by a proxy under a fleet (FleetRing), and
// the servers' keys by name.
type ringRig struct {
	t      *testing.T
	mc     []*testserver.Server // s0, s1, s2
	fp     *faultproxy.Proxy    // in front of s1
	yaml   func(extra string) string
	srv    *proxy.Server
	addr   string
	keys   map[string][]string // by server name
	health chan proxy.ServerHealth
}

// ringPoolOpts make s1 bad at its first failure and keep it bad while it
// is cut off: after the retry timeout it is probed, and only a probe that
// succeeds makes it good.
const ringPoolOpts = "  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 200\n" +
	"  health_check_interval: 100\n  health_check_timeout: 300\n  timeout: 1000\n"

// newRingRig starts the servers and the fleet's proxy, and fills every
// key with value(k).
func newRingRig(t *testing.T) *ringRig {
	t.Helper()
	r := &ringRig{t: t, health: make(chan proxy.ServerHealth, 64)}
	for range 3 {
		r.mc = append(r.mc, testserver.StartMemcached(t))
	}
	r.fp = faultproxy.New(t, r.mc[1].Addr)
	addrs := []string{r.mc[0].Addr, r.fp.Addr(), r.mc[2].Addr}
	listen := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t)) // a reload keeps the listener
	r.yaml = func(extra string) string {
		var b strings.Builder
		b.WriteString("mc:\n  listen: " + listen + "\n" + ringPoolOpts + extra + "  servers:\n")
		for i, a := range addrs {
			fmt.Fprintf(&b, "    - %s:1 s%d\n", a, i)
		}
		return b.String()
	}
	r.srv = runProxy(t, parseFaultYAML(t, r.yaml("")), proxy.Options{Logger: testLogger(t), FleetRing: true})
	r.addr = r.srv.Addr("mc").String()
	r.srv.WatchHealth(func(h proxy.ServerHealth) {
		select {
		case r.health <- h:
		default:
			t.Errorf("health report dropped: %+v", h)
		}
	})
	r.keys = keysFor(t, []string{"s0", "s1", "s2"}, 10)
	c := dial(t, r.addr)
	for _, name := range []string{"s0", "s1", "s2"} {
		for _, k := range r.keys[name] {
			if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(value(k)), value(k))); got != "STORED\r\n" {
				t.Fatalf("set %s: %q", k, got)
			}
		}
	}
	return r
}

// testLogger is the proxies' logger in tests: the test's log under -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// nextHealth returns the next health report, failing after a while.
func (r *ringRig) nextHealth() proxy.ServerHealth {
	r.t.Helper()
	select {
	case h := <-r.health:
		return h
	case <-time.After(10 * time.Second):
		r.t.Fatal("no health report")
	}
	return proxy.ServerHealth{}
}

// cutOff cuts the proxy off from s1 and waits until s1 is bad: WatchHealth
// tells it, after a request for one of its keys failed.
func (r *ringRig) cutOff(c *client) {
	r.t.Helper()
	r.fp.Stop()
	if got := c.do("get " + r.keys["s1"][0] + "\r\n"); !strings.HasPrefix(got, "SERVER_ERROR backend failure: ") {
		r.t.Fatalf("get of a cut-off server's key: %q", got)
	}
	h := r.nextHealth()
	if want := (proxy.ServerHealth{Pool: "mc", Server: "s1", Addr: r.fp.Addr(), Bad: true, Err: h.Err}); h != want || h.Err == "" {
		r.t.Fatalf("health report %+v, want %+v with a cause", h, want)
	}
}

// onlyOn fails unless key holds want on server i and on no other server
// (want "": on none).
func (r *ringRig) onlyOn(key, want string, i int) {
	r.t.Helper()
	for j, s := range r.mc {
		v, ok := direct(r.t, s.Addr, key)
		switch {
		case j == i && (!ok || v != want):
			r.t.Errorf("key %s on s%d: %q (%t), want %q", key, j, v, ok, want)
		case j != i && ok && v == want:
			r.t.Errorf("key %s (%q) on s%d, want it on s%d only", key, want, j, i)
		}
	}
}

// TestFleetRingCutOff: under a fleet, a server the proxy alone cannot
// reach is not ejected: its keys get the fast error of a bad backend and
// never land on another server, the other keys are served, and WatchHealth
// reports the server bad, then good when it is back.
func TestFleetRingCutOff(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newRingRig(t)
	c := dial(t, r.addr)
	r.cutOff(c)
	for _, k := range r.keys["s1"] {
		// markedbad: failed at once, without a try on the network.
		if got := c.do(fmt.Sprintf("set %s 0 0 5\r\nwrong\r\n", k)); got != backendFailure("markedbad") {
			t.Errorf("set of cut-off s1's key %s: %q, want the fast error of a bad backend", k, got)
		}
		if got := c.do("get " + k + "\r\n"); got != backendFailure("markedbad") {
			t.Errorf("get of cut-off s1's key %s: %q", k, got)
		}
		r.onlyOn(k, "wrong", -1) // no private rehash: on no server at all
	}
	for _, name := range []string{"s0", "s2"} {
		for _, k := range r.keys[name] {
			if got := c.do("get " + k + "\r\n"); got != hit(k) {
				t.Errorf("get of %s's key %s while s1 is cut off: %q", name, k, got)
			}
		}
	}
	if got := r.srv.Rings(); !equalRings(got, map[string]proxy.Ring{"mc": {}}) {
		t.Errorf("Rings: %v, want mc at version 0 with nothing ejected", got)
	}
	hs := r.srv.Health()
	if len(hs) != 3 || !hs[1].Bad || hs[1].Server != "s1" || hs[0].Bad || hs[2].Bad {
		t.Errorf("Health: %+v, want s1 alone bad", hs)
	}
	var late []proxy.ServerHealth // a watcher that comes later hears first of what is bad now
	r.srv.WatchHealth(func(h proxy.ServerHealth) { late = append(late, h) })
	if len(late) != 1 || late[0].Server != "s1" || !late[0].Bad {
		t.Errorf("a later watcher was told %+v, want s1 bad", late)
	}

	if err := r.fp.Start(); err != nil {
		t.Fatal(err)
	}
	if h := r.nextHealth(); h != (proxy.ServerHealth{Pool: "mc", Server: "s1", Addr: r.fp.Addr()}) {
		t.Fatalf("health report once s1 is back: %+v", h)
	}
	for _, k := range r.keys["s1"] {
		if got := c.do("get " + k + "\r\n"); got != hit(k) {
			t.Errorf("get of s1's key %s once it is back: %q", k, got)
		}
	}
}

// TestFleetRingEject: a ring that ejects s1 moves its keys exactly where a
// pool that ejected s1 itself puts them; a reload keeps the ring (the
// same distribution, and a new one); a ring restoring s1 brings its keys
// back; Rings reports each.
func TestFleetRingEject(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newRingRig(t)
	// The same servers in a pool that ejects on its own (no fleet).
	_, local := startProxy(t, strings.Replace(r.yaml(""), r.addr, "127.0.0.1:0", 1), "mc")
	lc := dial(t, local)
	c := dial(t, r.addr)
	r.cutOff(c)
	if got := lc.do("get " + r.keys["s1"][0] + "\r\n"); !strings.HasPrefix(got, "SERVER_ERROR backend failure: ") {
		t.Fatalf("local pool: get of cut-off s1's key: %q", got)
	}

	ring := proxy.Ring{Version: 7, Ejected: []string{"s1", "s9"}} // s9: not in the pool, ignored
	r.srv.SetRing("mc", ring)
	if got, want := r.srv.Rings(), map[string]proxy.Ring{"mc": {Version: 7, Ejected: []string{"s1"}}}; !equalRings(got, want) {
		t.Errorf("Rings after SetRing: %v, want %v", got, want)
	}
	// Where the ring puts s1's keys: found on the servers the first time.
	placed := map[string]int{}
	checkEjected := func(stage string) {
		t.Helper()
		for _, k := range r.keys["s1"] {
			v := "f-" + stage
			if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v)); got != "STORED\r\n" {
				t.Errorf("%s: set of ejected s1's key %s: %q", stage, k, got)
				continue
			}
			if i, ok := placed[k]; ok {
				r.onlyOn(k, v, i)
				continue
			}
			// The pool that ejected s1 itself reads it where the ring put it.
			if got, want := lc.do("get "+k+"\r\n"), fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v); got != want {
				t.Errorf("%s: s1's key %s written under the ring, read by a pool that ejected s1 itself: %q", stage, k, got)
			}
			for i, s := range r.mc {
				if got, ok := direct(t, s.Addr, k); ok && got == v {
					placed[k] = i
				}
			}
			if i, ok := placed[k]; !ok || i == 1 {
				t.Errorf("%s: ejected s1's key %s found on s%d (%t)", stage, k, i, ok)
			}
		}
		for _, name := range []string{"s0", "s2"} {
			for _, k := range r.keys[name] {
				if got := c.do("get " + k + "\r\n"); got != hit(k) {
					t.Errorf("%s: get of %s's key %s: %q", stage, name, k, got)
				}
			}
		}
	}
	checkEjected("ring")
	r.srv.SetFleetState(proxy.FleetState{ID: "p1", Prefix: "/sp/test", Connected: true, ConfigRevision: 12, Proxies: 2})
	stats := c.do("stats\r\n")
	for _, want := range []string{"STAT ring_version 7\r\n", "STAT ring_ejected 1\r\n", "STAT fleet_id p1\r\n",
		"STAT fleet_connected 1\r\n", "STAT fleet_config_revision 12\r\n", "STAT fleet_proxies 2\r\n"} {
		if !strings.Contains(stats, want) {
			t.Errorf("stats: no %q in\n%s", want, stats)
		}
	}
	if ps := r.srv.Stats().Pools[0]; ps.Ring == nil || ps.Ring.Version != 7 {
		t.Errorf("Stats: pool %s's ring %+v", ps.Name, ps.Ring)
	}

	// A reload with the same distribution, then one that builds a new one
	// (a hash tag no key uses): both keep the ring.
	for i, extra := range []string{"", "  hash_tag: \"{}\"\n"} {
		if err := r.srv.Reload(parseFaultYAML(t, r.yaml(extra))); err != nil {
			t.Fatal(err)
		}
		if got := r.srv.Rings(); got["mc"].Version != 7 || !slices.Equal(got["mc"].Ejected, []string{"s1"}) {
			t.Errorf("reload %d: Rings %v, want version 7 with s1 ejected", i, got)
		}
		checkEjected(fmt.Sprintf("reload%d", i))
	}

	// s1 is back: no report moves its keys, only a ring does.
	if err := r.fp.Start(); err != nil {
		t.Fatal(err)
	}
	if h := r.nextHealth(); h.Server != "s1" || h.Bad {
		t.Fatalf("health report once s1 is back: %+v", h)
	}
	checkEjected("back")
	r.srv.SetRing("mc", proxy.Ring{Version: 8})
	for _, k := range r.keys["s1"] {
		if got := c.do(fmt.Sprintf("set %s 0 0 4\r\nhome\r\n", k)); got != "STORED\r\n" {
			t.Errorf("set of restored s1's key %s: %q", k, got)
		}
		r.onlyOn(k, "home", 1)
	}
	if got := r.srv.Rings(); !equalRings(got, map[string]proxy.Ring{"mc": {Version: 8}}) {
		t.Errorf("Rings after restoring: %v", got)
	}
}

// equalRings compares rings by version and ejected names.
func equalRings(a, b map[string]proxy.Ring) bool {
	if len(a) != len(b) {
		return false
	}
	for name, ra := range a {
		rb, ok := b[name]
		if !ok || ra.Version != rb.Version || !slices.Equal(ra.Ejected, rb.Ejected) {
			return false
		}
	}
	return true
}

// TestFleetRingOnlyRingPools: pools that are no ring pool (no
// auto_eject_hosts, eject_policy fail_fast) are neither in Rings nor in
// Health, and SetRing leaves them alone; without FleetRing there are no
// rings at all.
func TestFleetRingOnlyRingPools(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	yaml := fmt.Sprintf("plain:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1 a\n"+
		"fast:\n  listen: 127.0.0.1:0\n  auto_eject_hosts: true\n  eject_policy: fail_fast\n  servers:\n    - %s:1 a\n"+
		"ring:\n  listen: 127.0.0.1:0\n  auto_eject_hosts: true\n  servers:\n    - %s:1 a\n", mc.Addr, mc.Addr, mc.Addr)
	for _, fleet := range []bool{true, false} {
		srv := runProxy(t, parseFaultYAML(t, yaml), proxy.Options{Logger: testLogger(t), FleetRing: fleet})
		for _, pool := range []string{"plain", "fast", "ring"} {
			srv.SetRing(pool, proxy.Ring{Version: 3, Ejected: []string{"a"}})
		}
		want := map[string]proxy.Ring{}
		if fleet {
			want["ring"] = proxy.Ring{Version: 3, Ejected: []string{"a"}}
		}
		if got := srv.Rings(); !equalRings(got, want) {
			t.Errorf("FleetRing %t: Rings %v, want %v", fleet, got, want)
		}
		if hs := srv.Health(); len(hs) != len(want) {
			t.Errorf("FleetRing %t: Health %+v", fleet, hs)
		}
		for _, pool := range []string{"plain", "fast"} {
			c := dial(t, srv.Addr(pool).String())
			if got := c.do("set k 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
				t.Errorf("FleetRing %t: pool %s after SetRing: %q", fleet, pool, got)
			}
		}
	}
}

// TestFleetRingRedis: a Redis ring pool under a fleet answers a cut-off
// server's keys with the fast error of a bad backend, writes none of them
// elsewhere, and moves them to the other server when the ring ejects it.
func TestFleetRingRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	rd := []*testserver.Server{testserver.StartRedis(t), testserver.StartRedis(t)}
	fp := faultproxy.New(t, rd[1].Addr)
	yaml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:0\n  redis: true\n%s  servers:\n    - %s:1 s0\n    - %s:1 s1\n",
		ringPoolOpts, rd[0].Addr, fp.Addr())
	srv := runProxy(t, parseFaultYAML(t, yaml), proxy.Options{Logger: testLogger(t), FleetRing: true})
	bad := make(chan proxy.ServerHealth, 16)
	srv.WatchHealth(func(h proxy.ServerHealth) {
		select {
		case bad <- h:
		default: // must not block
		}
	})
	keys := keysFor(t, []string{"s0", "s1"}, 5)
	c := respDial(t, srv.Addr("rd").String())
	direct0 := directRedis(t, rd[0].Addr, "", 0)

	fp.Stop()
	if got := c.do("GET", keys["s1"][0]); !strings.HasPrefix(got, "-ERR backend failure: ") {
		t.Fatalf("GET of a cut-off server's key: %q", got)
	}
	select {
	case h := <-bad:
		if h.Server != "s1" || !h.Bad {
			t.Fatalf("health report: %+v", h)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no health report")
	}
	for _, k := range keys["s1"] {
		if got := c.do("SET", k, "wrong"); got != "-ERR backend failure: markedbad\r\n" {
			t.Errorf("SET of cut-off s1's key %s: %q", k, got)
		}
		if got := direct0.do("EXISTS", k); got != ":0\r\n" {
			t.Errorf("cut-off s1's key %s on s0: %q", k, got)
		}
	}
	if got := c.do("SET", keys["s0"][0], "v"); got != "+OK\r\n" {
		t.Errorf("SET of s0's key: %q", got)
	}

	srv.SetRing("rd", proxy.Ring{Version: 1, Ejected: []string{"s1"}})
	for _, k := range keys["s1"] {
		if got := c.do("SET", k, "moved"); got != "+OK\r\n" {
			t.Errorf("SET of ejected s1's key %s: %q", k, got)
		}
		if got := direct0.do("GET", k); got != bulk("moved") {
			t.Errorf("ejected s1's key %s on s0: %q", k, got)
		}
	}
	if got := srv.Rings(); !equalRings(got, map[string]proxy.Ring{"rd": {Version: 1, Ejected: []string{"s1"}}}) {
		t.Errorf("Rings: %v", got)
	}
	if info := c.do("INFO", "proxy"); !strings.Contains(info, "\r\nring_version:1\r\n") || !strings.Contains(info, "\r\nring_ejected:1\r\n") {
		t.Errorf("INFO proxy shows no ring:\n%s", info)
	}
}

// TestFleetRingHealthReload: a reload tells WatchHealth's watchers what it
// changed: a bad server removed is told not bad; added back while still
// cut off, bad again (its backend, kept while it drains, is still bad).
func TestFleetRingHealthReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	r := newRingRig(t)
	c := dial(t, r.addr)
	r.cutOff(c)
	full := r.yaml("")
	without := strings.Replace(full, fmt.Sprintf("    - %s:1 s1\n", r.fp.Addr()), "", 1)
	if without == full {
		t.Fatal("the rig's config has no s1 line")
	}
	if err := r.srv.Reload(parseFaultYAML(t, without)); err != nil {
		t.Fatal(err)
	}
	if h := r.nextHealth(); h != (proxy.ServerHealth{Pool: "mc", Server: "s1", Addr: r.fp.Addr()}) {
		t.Fatalf("health report once s1 is removed: %+v", h)
	}
	if hs := r.srv.Health(); len(hs) != 2 {
		t.Errorf("Health after removing s1: %+v", hs)
	}
	if err := r.srv.Reload(parseFaultYAML(t, full)); err != nil {
		t.Fatal(err)
	}
	if got := c.do("get " + r.keys["s1"][0] + "\r\n"); !strings.HasPrefix(got, "SERVER_ERROR backend failure: ") {
		t.Fatalf("get of s1's key once it is back in the pool, still cut off: %q", got)
	}
	if h := r.nextHealth(); h.Server != "s1" || !h.Bad {
		t.Fatalf("health report once s1 is back in the pool, still cut off: %+v", h)
	}
}
