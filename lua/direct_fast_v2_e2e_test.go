package lua_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"shardproxy/config"
	"shardproxy/internal/mcdiff"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// Handler bodies: one the router sends without entering Lua (and, from
// a command's second request on, without the state's lock), one that
// runs in Lua and answers the same.
const (
	directBody = `return rctx:enqueue_and_wait(r, h)`
	luaBody    = `local res = rctx:enqueue_and_wait(r, h) if res then return res end return "SERVER_ERROR none\r\n"`
)

// TestV2DirectSameAsLua runs mcdiff's random request sequences through
// two Lua pools of the same V2 route, one whose handler takes the direct
// (and lock-free) way and one whose handler runs in Lua, each in front of
// a memcached of its own, reloading both between rounds; then the same
// requests to two such pools whose backend refuses connections. Every
// reply, and at the end every counter of the pools, their routers and
// their servers, must be the same.
func TestV2DirectSameAsLua(t *testing.T) {
	if testing.Short() {
		t.Skip("starts memcached")
	}
	// Without memcached's LRU maintainer and crawler, which hold items
	// at times and so change whether an incr makes a new item (and what
	// the h flag says of it): both servers then answer alike.
	var mc [2]*testserver.Server
	for i := range mc {
		mc[i] = testserver.StartMemcached(t, "-m", "1024", "-o", "no_lru_maintainer,no_lru_crawler")
	}
	down := closedPort(t)
	dir := t.TempDir()
	type pool struct{ name, body, file string }
	pools := []*pool{{name: "direct", body: directBody}, {name: "lua", body: luaBody},
		{name: "directdown", body: directBody}, {name: "luadown", body: luaBody}}
	ports := []int{mc[0].Port, mc[1].Port, down, down}
	write := func(version int) {
		t.Helper()
		for i, p := range pools {
			p.file = fmt.Sprintf("%s/%s.lua", dir, p.name)
			// A comment a reload changes, then the one generator sending
			// every key command to b1.
			src := fmt.Sprintf("-- version %d", version) +
				strings.ReplaceAll(v2Handler("function(r) "+p.body+" end"), "{{mc}}", fmt.Sprint(ports[i]))
			if err := os.WriteFile(p.file, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(0)
	var yaml strings.Builder
	for _, p := range pools {
		fmt.Fprintf(&yaml, "%s:\n  listen: 127.0.0.1:0\n  lua: %s\n  timeout: 2000\n  preconnect: false\n", p.name, p.file)
	}
	srv, _, err := newProxy(t, yaml.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(yaml.String()), "test.yml")
	if err != nil {
		t.Fatal(err)
	}

	for pair := 0; pair < len(pools); pair += 2 {
		a, b := pools[pair], pools[pair+1]
		ta, tb := dialTarget(t, srv, a.name), dialTarget(t, srv, b.name)
		sa, sb := mcdiff.NewSession(ta), mcdiff.NewSession(tb)
		g := mcdiff.NewGen(uint64(17+pair), mcdiff.Options{})
		var history []string // the last requests and replies, for a failure's message
		for round := range 3 {
			if round > 0 {
				write(round)
				if err := srv.Reload(cfg); err != nil {
					t.Fatalf("reload %d: %v", round, err)
				}
			}
			for i := range 400 {
				r := g.Next()
				if r.LongToken() {
					// How the parser frames a line with a too-long key
					// is memcache's business (and the same for both).
					continue
				}
				ra, errA := sa.Do(r)
				rb, errB := sb.Do(r)
				if errA != nil && errB != nil {
					// An unknown command: both close the connection, as
					// memcached's proxy does (one may see a reset).
					ta, tb = dialTarget(t, srv, a.name), dialTarget(t, srv, b.name)
					sa.T, sb.T = ta, tb
					continue
				}
				if errA != nil || errB != nil {
					t.Fatalf("%s/%s round %d request %d %s: %v / %v", a.name, b.name, round, i, short(sa.Wire(r)), errA, errB)
				}
				history = append(history, fmt.Sprintf("%s -> %s | %s", short(sa.Wire(r)), short(ra), short(rb)))
				if len(history) > 20 {
					history = history[1:]
				}
				if !bytes.Equal(mcdiff.Normalize(ra), mcdiff.Normalize(rb)) {
					t.Fatalf("%s/%s round %d request %d %s:\n  %s: %s\n  %s: %s\nlast requests:\n%s", a.name, b.name, round, i,
						short(sa.Wire(r)), a.name, short(ra), b.name, short(rb), strings.Join(history, "\n"))
				}
			}
		}
		ta.Close()
		tb.Close()
		// Both sessions gone: a session counts its client's EOF before
		// it leaves, so the counters below are final.
		eventually(t, "no request in flight and no client connected", func() bool {
			st := srv.Stats()
			return routerStat(t, st, a.name, "lua_active") == 0 && routerStat(t, st, b.name, "lua_active") == 0 &&
				poolStats(t, st, a.name).ClientConnections == 0 && poolStats(t, st, b.name).ClientConnections == 0
		})
		st := srv.Stats()
		pa, pb := poolStats(t, st, a.name), poolStats(t, st, b.name)
		// Which requests reach a server that refuses connections depends
		// on when it is dialled again: its counters are not compared.
		live := !strings.HasSuffix(a.name, "down")
		if got, want := sameCounters(pa, live), sameCounters(pb, live); got != want {
			t.Errorf("counters of %s:\n  %s\nof %s:\n  %s", a.name, got, b.name, want)
		}
	}
}

// dialTarget connects an mcdiff target to the named pool.
func dialTarget(t *testing.T, srv *proxy.Server, pool string) *mcdiff.ConnTarget {
	t.Helper()
	c, err := mcdiff.Dial(srv.Addr(pool).String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// poolStats returns the named pool's stats.
func poolStats(t *testing.T, st proxy.Stats, name string) proxy.PoolStats {
	t.Helper()
	for _, p := range st.Pools {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no pool %s in the stats", name)
	return proxy.PoolStats{}
}

// routerStat returns one counter of the named pool's router.
func routerStat(t *testing.T, st proxy.Stats, pool, name string) int64 {
	t.Helper()
	for _, s := range poolStats(t, st, pool).Router {
		if s.Name == name {
			return s.Value
		}
	}
	t.Fatalf("pool %s has no router counter %s", pool, name)
	return 0
}

// sameCounters prints what must be the same for two pools that saw the
// same requests: the pool's, its router's and (with servers) its server's
// counters, but for what depends on the servers' clocks and cas uniques
// (latencies, reply bytes).
func sameCounters(p proxy.PoolStats, servers bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "requests=%d protocol_errors=%d client_eof=%d client_err=%d forward_error=%d fragments=%d",
		p.Requests, p.ProtocolErrors, p.ClientEOF, p.ClientErr, p.ForwardError, p.Fragments)
	for _, s := range p.Router {
		fmt.Fprintf(&b, " %s=%d", s.Name, s.Value)
	}
	for _, s := range p.Servers {
		if !servers {
			break
		}
		fmt.Fprintf(&b, " server(requests=%d request_bytes=%d responses=%d eof=%d err=%d timedout=%d failures=%d ejects=%d)",
			s.Requests, s.RequestBytes, s.Responses, s.ServerEOF, s.ServerErr, s.ServerTimedout, s.Failures, s.Ejects)
	}
	return b.String()
}

// short quotes b, cut in the middle when long.
func short(b []byte) string {
	if len(b) > 120 {
		return fmt.Sprintf("%q...(%d bytes)...%q", b[:80], len(b)-100, b[len(b)-20:])
	}
	return fmt.Sprintf("%q", b)
}
