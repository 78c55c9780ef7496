package lua_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/lua"
	"shardproxy/sharding"
)

// TestBackendOptions checks the tunables: memcached's defaults, the global
// mcp.backend_* settings (for the backends made after them), the options
// of the table form, and that pools share a backend they both name.
func TestBackendOptions(t *testing.T) {
	r, err := load(t, `
function mcp_config_pools()
  local d = mcp.backend("defaults", "127.0.0.1", 1000)
  mcp.backend_connect_timeout(1.5)
  mcp.backend_retry_timeout(4)
  mcp.backend_read_timeout(0.25)
  mcp.backend_failure_limit(7)
  mcp.tcp_keepalive(true)
  local a = mcp.backend("a", "127.0.0.1", 1001)
  local b = mcp.backend({ label = "b", host = "127.0.0.1", port = "1002", connecttimeout = 0.5,
    retrytimeout = 1, readtimeout = 2, failurelimit = 1, tcpkeepalive = false, connections = 3 })
  mcp.backend_read_timeout(9)
  local c = mcp.backend("c", "127.0.0.1", 1003)
  mcp.active_req_limit(10)
  mcp.buffer_memory_limit(64)
  return { p1 = mcp.pool({ d, a, b }), p2 = mcp.pool({ a, c }) }
end
`+okRoutes)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name, addr              string
		connect, retry, timeout time.Duration
		failureLimit, conns     int
		keepalive               bool
	}
	wants := []want{
		{"defaults", "127.0.0.1:1000", 5 * time.Second, 3 * time.Second, 3 * time.Second, 3, 1, false},
		{"a", "127.0.0.1:1001", 1500 * time.Millisecond, 4 * time.Second, 250 * time.Millisecond, 7, 1, true},
		{"b", "127.0.0.1:1002", 500 * time.Millisecond, time.Second, 2 * time.Second, 1, 3, false},
		{"c", "127.0.0.1:1003", 1500 * time.Millisecond, 4 * time.Second, 9 * time.Second, 7, 1, true},
	}
	bs := r.Backends()
	if len(bs) != len(wants) {
		t.Fatalf("%d backends, want %d (a shared by both pools)", len(bs), len(wants))
	}
	for i, w := range wants {
		c := bs[i].Config()
		got := want{c.Name, c.Addr, c.ConnectTimeout, c.RetryTimeout, c.Timeout, c.FailureLimit, c.Conns, c.TCPKeepalive}
		if got != w {
			t.Errorf("backend %d:\n got %+v\nwant %+v", i, got, w)
		}
	}
}

// TestDefaults checks that Config.Defaults (the pool's YAML) replace
// memcached's defaults.
func TestDefaults(t *testing.T) {
	r, err := lua.New(lua.Config{Path: "routes.lua", Source: []byte(okPools + okRoutes), Dialect: memcacheDialect(t),
		Logger: discard(), Defaults: lua.Defaults{ConnectTimeout: time.Second, RetryTimeout: 2 * time.Second,
			ReadTimeout: 700 * time.Millisecond, FailureLimit: 9, TCPKeepalive: true, Conns: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := r.Backends()[0].Config()
	if c.ConnectTimeout != time.Second || c.RetryTimeout != 2*time.Second || c.Timeout != 700*time.Millisecond ||
		c.FailureLimit != 9 || !c.TCPKeepalive || c.Conns != 2 {
		t.Errorf("%+v", c)
	}
}

// TestTags checks listener tags: a handler attached with the router's tag
// wins over the untagged one; other tags fall back to the untagged one.
func TestTags(t *testing.T) {
	src := okPools + `
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return "HD untagged\r\n" end)
  mcp.attach(mcp.CMD_GET, function(r) return "HD tag b\r\n" end, "b")
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return "HD storage b\r\n" end, "b")
end`
	d := memcacheDialect(t)
	for _, tc := range []struct{ tag, req, want string }{
		{"", "get k\r\n", "HD untagged\r\n"},
		{"b", "get k\r\n", "HD storage b\r\n"},
		{"b", "delete k\r\n", "HD storage b\r\n"},
		{"other", "get k\r\n", "HD untagged\r\n"},
		{"other", "delete k\r\n", "SERVER_ERROR no route for command delete\r\n"},
	} {
		r, err := lua.New(lua.Config{Path: "routes.lua", Source: []byte(src), Dialect: d, Tag: tc.tag, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		if got := route(t, r, d, tc.req); got != tc.want {
			t.Errorf("tag %q, %q: got %q, want %q", tc.tag, tc.req, got, tc.want)
		}
		r.Close()
	}
}

// TestTimeouts checks readtimeout, connecttimeout, failurelimit with
// retrytimeout, and down against misbehaving backends.
func TestTimeouts(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return {
    slow = mcp.pool({ mcp.backend({ label = "slow", host = "127.0.0.1", port = {{SLOW}}, connecttimeout = 3, readtimeout = 0.1 }) }),
    silent = mcp.pool({ mcp.backend({ label = "silent", host = "127.0.0.1", port = {{SILENT}}, connecttimeout = 0.2 }) }),
    refused = mcp.pool({ mcp.backend({ label = "refused", host = "127.0.0.1", port = {{REFUSED}}, failurelimit = 2, retrytimeout = 0.5 }) }),
    down = mcp.pool({ mcp.backend({ label = "down", host = "127.0.0.1", port = {{UP}}, down = true }) }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p[r:key()](r) end)
end`, map[string]int{
		"SLOW":    delayRelay(t, mc[0].Addr, 500*time.Millisecond),
		"SILENT":  silentPort(t),
		"REFUSED": closedPort(t),
		"UP":      mc[0].Port,
	}, "  preconnect: false\n") // failures counted from the first request
	c := dial(t, addr)
	for _, tc := range []struct {
		key, want   string
		least, most time.Duration
	}{
		{"slow", "SERVER_ERROR backend failure\r\n", 100 * time.Millisecond, time.Second},
		{"slow", "SERVER_ERROR backend failure\r\n", 100 * time.Millisecond, time.Second}, // a timeout drops the socket: it reconnects
		{"silent", "SERVER_ERROR backend failure\r\n", 200 * time.Millisecond, 500 * time.Millisecond},
		{"refused", "SERVER_ERROR backend failure\r\n", 0, 200 * time.Millisecond},
		{"refused", "SERVER_ERROR backend failure\r\n", 0, 200 * time.Millisecond},
		{"refused", "SERVER_ERROR backend failure\r\n", 0, 50 * time.Millisecond},
		{"down", "SERVER_ERROR backend failure\r\n", 0, 50 * time.Millisecond},
	} {
		got, took := c.timed("get " + tc.key + "\r\n")
		if got != tc.want || took < tc.least || took > tc.most {
			t.Errorf("%s: got %q after %v, want %q within [%v, %v]", tc.key, got, took, tc.want, tc.least, tc.most)
		}
	}
	if raceDetector {
		// backend.(*Backend).retry reads lastCause after unlocking while a
		// failed dial writes it: the race detector flags the retry below.
		t.Log("retrytimeout not checked under -race")
		return
	}
	time.Sleep(600 * time.Millisecond) // retrytimeout passes: the next request dials again
	if got := c.do("get refused\r\n"); got != "SERVER_ERROR backend failure\r\n" {
		t.Errorf("after retrytimeout: %q", got)
	}
}

// TestPlacement checks that pools place keys as package sharding computes
// memcached's and twemproxy's placement: jump with XXH3 and a seed (the
// default), the ketama-mode ring with the md5 key hash, twemproxy's ketama
// with fnv1a_64 (checked against a native YAML pool), and the stop and tags
// key filters.
func TestPlacement(t *testing.T) {
	mc := memcached(t, 3)
	ports := map[string]int{"A": mc[0].Port, "B": mc[1].Port, "C": mc[2].Port}
	hostPort := func(i int) string { return mc[i].Addr }
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  local a = mcp.backend("127.0.0.1:{{A}}", "127.0.0.1", {{A}})
  local b = mcp.backend("127.0.0.1:{{B}}", "127.0.0.1", {{B}})
  local c = mcp.backend("127.0.0.1:{{C}}", "127.0.0.1", {{C}})
  return {
    jump = mcp.pool({ a, b, c }, { seed = "myseed", beprefix = "j", iothread = false }),
    plain = mcp.pool({ a, b, c }, { dist = mcp.dist_jump_hash, hash = mcp.hash_xxhash }),
    ring = mcp.pool({ a, b, c }, { dist = mcp.dist_ring_hash, omode = "ketama", hash = mcp.dist_ring_hash.hash }),
    ketama = mcp.pool({ a, b, c }, { dist = mcp.dist_ketama, hash = mcp.hash_fnv1a_64 }),
    modula = mcp.pool({ a, b, c }, { dist = mcp.dist_modula, hash = mcp.hash_crc32 }),
    random = mcp.pool({ a, b, c }, { dist = mcp.dist_random }),
    stop = mcp.pool({ a, b, c }, { filter = "stop", filter_conf = "|#|" }),
    tags = mcp.pool({ a, b, c }, { filter = "tags", filter_conf = "{}" }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_SET, function(r)
    local pool = string.match(r:key(), "^(%a+)-")
    return p[pool](r)
  end)
end`, ports, "")
	names := func(f func(i int) string) []sharding.Server {
		s := make([]sharding.Server, 3)
		for i := range s {
			s[i] = sharding.Server{Name: f(i), Weight: 1}
		}
		return s
	}
	index := func(i int) string { return strconv.Itoa(i + 1) }
	pools := map[string]sharding.Config{
		"jump":  {Servers: names(index), Hash: "xxh3", Distribution: "jump", KeepOrder: true, Seed: sharding.XXH3([]byte("myseed"), 0)},
		"plain": {Servers: names(index), Hash: "xxh3", Distribution: "jump", KeepOrder: true},
		"ring": {Servers: names(hostPort), Hash: "md5", Distribution: "ring", KeepOrder: true,
			Dist: sharding.DistOptions{RingMode: "ketama"}},
		"ketama": {Servers: names(hostPort), Hash: "fnv1a_64", Distribution: "ketama"},
		"modula": {Servers: names(hostPort), Hash: "crc32", Distribution: "modula"},
	}
	c := dial(t, addr)
	server := func(key string) int {
		t.Helper()
		found := -1
		for i, s := range mc {
			if _, ok := get(t, s.Addr, key); ok {
				if found >= 0 {
					t.Fatalf("%s on two servers", key)
				}
				found = i
			}
		}
		return found
	}
	store := func(key string) {
		t.Helper()
		if got := c.do(fmt.Sprintf("set %s 0 0 1\r\nx\r\n", key)); got != "STORED\r\n" {
			t.Fatalf("set %s: %q", key, got)
		}
	}
	for name, cfg := range pools {
		sp, err := sharding.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for i := range 24 {
			key := fmt.Sprintf("%s-key%d", name, i)
			store(key)
			idx, _ := sp.Pick([]byte(key))
			want := -1
			for j := range mc {
				if sp.Servers()[idx].Name == cfg.Servers[j].Name {
					want = j
				}
			}
			if got := server(key); got != want {
				t.Errorf("pool %s: %s on server %d, want %d", name, key, got, want)
			}
			seen[want] = true
		}
		if len(seen) < 2 && name != "ketama" { // fnv1a of similar keys may well cluster
			t.Errorf("pool %s used one server only", name)
		}
	}
	for i := range 6 { // random: anywhere, once
		key := fmt.Sprintf("random-key%d", i)
		store(key)
		if got := server(key); got < 0 {
			t.Errorf("%s not stored", key)
		}
	}
	for _, tc := range []struct{ key, same string }{
		{"stop-user1|#|a", "stop-user1"},
		{"stop-user1|#|b", "stop-user1"},
		{"tags-x{user7}y", "user7"},
		{"tags-{user9}", "user9"},
	} {
		store(tc.key)
		sp, _ := sharding.New(sharding.Config{Servers: names(index), Hash: "xxh3", Distribution: "jump", KeepOrder: true})
		idx, _ := sp.Pick([]byte(tc.same))
		if got := server(tc.key); got != idx {
			t.Errorf("%s on server %d, want %d (as %s)", tc.key, got, idx, tc.same)
		}
	}
}

// TestNativeAgreement checks that a Lua pool with twemproxy's ketama and
// fnv1a_64 and the servers' twemproxy names places keys where a native
// YAML pool of the same servers looks for them.
func TestNativeAgreement(t *testing.T) {
	mc := memcached(t, 3)
	file := writeRoutes(t, fmt.Sprintf(`
function mcp_config_pools()
  local bs = {}
  for i, port in ipairs({ %d, %d, %d }) do
    bs[i] = mcp.backend("127.0.0.1:" .. port, "127.0.0.1", port)
  end
  return mcp.pool(bs, { dist = mcp.dist_ketama, hash = mcp.hash_fnv1a_64 })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return p(r) end)
end`, mc[0].Port, mc[1].Port, mc[2].Port))
	srv, _, err := newProxy(t, fmt.Sprintf("lp:\n  listen: 127.0.0.1:0\n  lua: %s\nnp:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1\n    - %s:1\n    - %s:1\n",
		file, mc[0].Addr, mc[1].Addr, mc[2].Addr))
	if err != nil {
		t.Fatal(err)
	}
	lp, np := dial(t, srv.Addr("lp").String()), dial(t, srv.Addr("np").String())
	for i := range 50 {
		key := fmt.Sprintf("agree%d", i)
		if got := lp.do(fmt.Sprintf("set %s 0 0 1\r\nx\r\n", key)); got != "STORED\r\n" {
			t.Fatalf("set: %q", got)
		}
		if got := np.do("get " + key + "\r\n"); got != "VALUE "+key+" 0 1\r\nx\r\nEND\r\n" {
			t.Errorf("native pool does not find %s: %q", key, got)
		}
	}
}

// TestLimits checks mcp.active_req_limit and mcp.buffer_memory_limit as
// memcached 1.6.45's proxy applies them (t/proxylimits.t): over the
// active limit a request is refused; over the buffer limit a request with
// a value is refused ("out of memory"), and a reply read while over it
// fails its backend connection (error=outofmemory), its request answered
// "backend failure", even the reply to the request that filled the
// buffers. In both cases the pool works again once nothing is in flight.
func TestLimits(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 200*time.Millisecond)
	big := strings.Repeat("v", 2000)
	for _, tc := range []struct{ setting, second, first, want, event string }{
		{"mcp.active_req_limit(1)", "get k\r\n", "STORED\r\n", "SERVER_ERROR active request limit reached\r\n", ""},
		{"mcp.buffer_memory_limit(1)", "set k2 0 0 1\r\nx\r\n", "SERVER_ERROR backend failure\r\n",
			"SERVER_ERROR out of memory\r\n", "type=proxy_backend error=outofmemory name=127.0.0.1"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			addr, _ := luaRoutes(t, `
function mcp_config_pools()
  `+tc.setting+`
  return mcp.pool({ mcp.backend("slow", "127.0.0.1", {{SLOW}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return p(r) end)
end`, map[string]int{"SLOW": slow}, "")
			events := watch(t, addr, "proxyevents")
			c := dial(t, addr)
			c.do("get warm\r\n")
			c.send(fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(big), big) + tc.second)
			if got := c.reply(); got != tc.first {
				t.Errorf("first: %q, want %q", got, tc.first)
			}
			if got := c.reply(); got != tc.want {
				t.Errorf("second: %q, want %q", got, tc.want)
			}
			if tc.event != "" {
				if got := events.watchLine(); !strings.Contains(got, tc.event) {
					t.Errorf("proxyevents: %q, want %q", got, tc.event)
				}
			}
			for range 3 { // the limits count requests in flight only
				if got := c.do("get k\r\n"); !strings.HasPrefix(got, "VALUE k 0 2000") {
					t.Errorf("after: %q", got)
				}
			}
		})
	}
}

// TestLimitStats: stats proxy shows the route file's limits as memcached's
// proxy does (buffer_memory_limit in bytes; 0 for none) and the bytes in
// flight, none once every reply is in.
func TestLimitStats(t *testing.T) {
	for _, tc := range []struct{ setting, active, buffer string }{
		{"", "0", "0"},
		{"mcp.active_req_limit(4) mcp.buffer_memory_limit(20)", "4", "20480"},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			addr, _ := startLua(t, writeRoutes(t, `
function mcp_config_pools() `+tc.setting+` return true end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return mcp.internal(r) end)
end`), "")
			c := dial(t, addr)
			c.do("set a 0 0 1\r\nx\r\n")
			st := statsOf(t, c, "proxy")
			for k, want := range map[string]string{"active_req_limit": tc.active, "buffer_memory_limit": tc.buffer, "buffer_memory_used": "0"} {
				if st[k] != want {
					t.Errorf("%s = %q, want %q", k, st[k], want)
				}
			}
		})
	}
}

// TestBufferLimitAtCommandLine: a set whose command line arrives while
// the buffers are over mcp.buffer_memory_limit is refused even if they
// have drained by the time its value has all come, as memcached's proxy
// decides at the command line (route.Exchange.Over).
func TestBufferLimitAtCommandLine(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 200*time.Millisecond)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  mcp.buffer_memory_limit(1)
  return mcp.pool({ mcp.backend("slow", "127.0.0.1", {{SLOW}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return p(r) end)
end`, map[string]int{"SLOW": slow}, "")
	a, b := dial(t, addr), dial(t, addr)
	a.do("get warm\r\n")
	big := strings.Repeat("v", 2000)
	a.send(fmt.Sprintf("set k 0 0 %d\r\n%s\r\n", len(big), big)) // over the limit until its reply
	time.Sleep(50 * time.Millisecond)
	b.send("set k2 0 0 10\r\n01234") // the command line, while over
	time.Sleep(50 * time.Millisecond)
	if got := a.reply(); got != "SERVER_ERROR backend failure\r\n" { // its reply found the buffers full
		t.Fatalf("first: %q", got)
	}
	b.send("56789\r\n") // the rest of the value, the buffers empty now
	if got := b.reply(); got != "SERVER_ERROR out of memory\r\n" {
		t.Errorf("second: %q, want SERVER_ERROR out of memory", got)
	}
	if got := b.do("set k3 0 0 1\r\nx\r\n"); got != "STORED\r\n" {
		t.Errorf("after: %q", got)
	}
}
