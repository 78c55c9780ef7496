package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/fleet"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// ringOnly is a fleet.Target of the ring alone: these proxies keep the
// configuration they started with.
type ringOnly struct{ ringTarget }

func (ringOnly) Apply(*config.Config) (string, error) {
	return "", errors.New("no configuration from etcd here")
}
func (ringOnly) Refuse(string, error) {}

// ringProxy is one in-process proxy of the fleet, which reaches each
// memcached through a fault proxy of its own.
type ringProxy struct {
	srv  *proxy.Server
	addr string
	fp   []*faultproxy.Proxy // by server
}

func startRingProxy(t *testing.T, eps []string, id string, mcs []string) *ringProxy {
	t.Helper()
	rp := &ringProxy{}
	yml := "cache:\n  listen: 127.0.0.1:0\n  hash: fnv1a_64\n  distribution: ketama\n  timeout: 500\n" +
		"  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 300\n  servers:\n"
	for j, mc := range mcs {
		fp := faultproxy.New(t, mc)
		rp.fp = append(rp.fp, fp)
		yml += fmt.Sprintf("    - %s:1 mc%d\n", fp.Addr(), j+1)
	}
	cfg, err := config.Parse([]byte(yml), "")
	if err != nil {
		t.Fatal(err)
	}
	if rp.srv, err = proxy.New(cfg, proxy.Options{FleetRing: true}); err != nil {
		t.Fatal(err)
	}
	if err := rp.srv.Start(); err != nil {
		t.Fatal(err)
	}
	rp.addr = rp.srv.Addr("cache").String()
	a, err := fleet.New(fleet.Options{Conn: fleet.Conn{Endpoints: eps}, Prefix: fleetPrefix, ID: id,
		Target: ringOnly{ringTarget{rp.srv}}, LeaseTTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
		a.Close()
		rp.srv.Shutdown(context.Background())
	})
	return rp
}

// dialRing is a memcache connection to a proxy of the ring test.
func dialRing(t *testing.T, addr string) *mcConn {
	t.Helper()
	c, err := dialMC(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.nc.Close() })
	return c
}

// set stores val at key through c; false on a server error.
func set(t *testing.T, c *mcConn, key, val string) bool {
	t.Helper()
	line, _, err := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(val), val))
	switch {
	case err != nil:
		t.Fatalf("set %s: %v", key, err)
	case strings.HasPrefix(line, "SERVER_ERROR"):
		return false
	case line != "STORED\r\n":
		t.Fatalf("set %s: %q", key, line)
	}
	return true
}

// get returns key's value through c, "" for a miss; ok false on a server
// error.
func get(t *testing.T, c *mcConn, key string) (val string, ok bool) {
	t.Helper()
	line, val, err := c.do("get " + key + "\r\n")
	switch {
	case err != nil:
		t.Fatalf("get %s: %v", key, err)
	case strings.HasPrefix(line, "SERVER_ERROR"):
		return "", false
	case line != "END\r\n" && !strings.HasPrefix(line, "VALUE "+key+" "):
		t.Fatalf("get %s: %q", key, line)
	}
	return val, true
}

func ringKeys() []string {
	var keys []string
	for i := range 200 {
		keys = append(keys, fmt.Sprintf("ring:%d", i))
	}
	return keys
}

// writeAll sets every key to tag+key through c; it returns the keys whose
// write failed.
func writeAll(t *testing.T, c *mcConn, tag string) map[string]bool {
	t.Helper()
	failed := map[string]bool{}
	for _, k := range ringKeys() {
		if !set(t, c, k, tag+k) {
			failed[k] = true
		}
	}
	return failed
}

// stale counts the keys whose read through c does not return what the
// last successful write left: want(key).
func stale(t *testing.T, c *mcConn, want func(string) string) (stale, errs int) {
	t.Helper()
	for _, k := range ringKeys() {
		v, ok := get(t, c, k)
		switch {
		case !ok:
			errs++
		case v != want(k):
			stale++
		}
	}
	return stale, errs
}

// sameRing waits until every proxy runs one ring version ejecting want.
func sameRing(t *testing.T, rps []*ringProxy, want []string) int64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r0 := ringTarget{rps[0].srv}.Rings()["cache"]
		same := slices.Equal(r0.Ejected, want) && r0.Version > 0
		for _, rp := range rps[1:] {
			r := ringTarget{rp.srv}.Rings()["cache"]
			same = same && r.Equal(r0)
		}
		if same {
			return r0.Version
		}
		if time.Now().After(deadline) {
			t.Fatalf("no common ring ejecting %v: proxy 0 runs %+v", want, r0)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFleetRing: three proxies over three memcached. One proxy cut off from
// a server fails that server's keys at once and rehashes nothing: no read
// through another proxy is stale. When a second proxy is cut off too (two
// of three), every proxy ejects the server at one ring version and writes
// and reads agree again; healed, the server is restored everywhere.
func TestFleetRing(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd and memcached")
	}
	c := testserver.StartEtcd(t, 3)
	mcs := []string{testserver.StartMemcached(t).Addr, testserver.StartMemcached(t).Addr, testserver.StartMemcached(t).Addr}
	var rps []*ringProxy
	for i := range 3 {
		rps = append(rps, startRingProxy(t, c.Endpoints(), fmt.Sprintf("r%d", i), mcs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(fleetStatus(t, c.Endpoints()).Proxies) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the three proxies never registered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	writer, reader, third := dialRing(t, rps[0].addr), dialRing(t, rps[1].addr), dialRing(t, rps[2].addr)
	if failed := writeAll(t, writer, "v1:"); len(failed) != 0 {
		t.Fatalf("writes failed with every server up: %d", len(failed))
	}

	// Proxy 0 cut off from mc2: its writes of mc2's keys fail, the
	// others land; reads through proxy 1 see exactly what was written.
	rps[0].fp[1].Stop()
	failed := writeAll(t, writer, "v2:")
	if len(failed) == 0 || len(failed) == len(ringKeys()) {
		t.Fatalf("cut off from one of three servers, %d of %d writes failed", len(failed), len(ringKeys()))
	}
	waitHealthReport(t, c.Endpoints(), "mc2", 1)
	failed = writeAll(t, writer, "v2:") // again, with mc2 marked bad on proxy 0
	want := func(k string) string {
		if failed[k] {
			return "v1:" + k
		}
		return "v2:" + k
	}
	if s, errs := stale(t, reader, want); s != 0 || errs != 0 {
		t.Fatalf("one proxy cut off: %d stale reads, %d errors through another proxy", s, errs)
	}
	for i, rp := range rps {
		if r := (ringTarget{rp.srv}).Rings()["cache"]; r.Version != 0 {
			t.Fatalf("proxy %d runs ring %+v on one report of three", i, r)
		}
	}
	t.Logf("proxy 0 cut off from mc2: %d of %d writes failed at once, 0 stale reads through proxy 1", len(failed), len(ringKeys()))

	// Proxy 1 cut off too: two of three report mc2; every proxy ejects it
	// at one version.
	rps[1].fp[1].Stop()
	stale(t, reader, want) // proxy 1 meets the cut
	start := time.Now()
	v := sameRing(t, rps, []string{"mc2"})
	t.Logf("after proxy 1 met the cut, every proxy ran ring version %d within %v", v, time.Since(start))
	if failed := writeAll(t, writer, "v3:"); len(failed) != 0 {
		t.Fatalf("after the fleet ejected mc2, %d writes failed", len(failed))
	}
	v3 := func(k string) string { return "v3:" + k }
	for i, c := range []*mcConn{reader, third} {
		if s, errs := stale(t, c, v3); s != 0 || errs != 0 {
			t.Fatalf("mc2 ejected at version %d: through proxy %d, %d stale reads, %d errors", v, i+1, s, errs)
		}
	}
	t.Logf("mc2 ejected by every proxy at ring version %d; reads through proxies 1 and 2 agree", v)

	// Healed: restored everywhere at the next version.
	rps[0].fp[1].Start()
	rps[1].fp[1].Start()
	waitHealthReport(t, c.Endpoints(), "mc2", 0) // both proxies' probes found it back
	v2 := sameRing(t, rps, []string{})
	if v2 <= v {
		t.Fatalf("restored at version %d, not after %d", v2, v)
	}
	if failed := writeAll(t, writer, "v4:"); len(failed) != 0 {
		t.Fatalf("after mc2 was restored, %d writes failed", len(failed))
	}
	if s, errs := stale(t, third, func(k string) string { return "v4:" + k }); s != 0 || errs != 0 {
		t.Fatalf("mc2 restored: %d stale reads, %d errors", s, errs)
	}
}

// waitHealthReport waits until exactly n proxies report server failing in
// etcd.
func waitHealthReport(t *testing.T, eps []string, server string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(fleetStatus(t, eps).Reports["cache"][server]) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d proxies never reported %s", n, server)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
