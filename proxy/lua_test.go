package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/lua"
	"shardproxy/proxy"
)

// The Lua router's own behaviour is tested in package lua, through proxies
// like these; here are the proxy's side of it: the YAML lua key, a route
// file that does not load, the YAML options a Lua pool takes, and the
// throughput of a Lua route next to the native one.

// directRoute is the handler the router runs without entering Lua;
// luaRoute does the same in Lua.
const (
	directRoute = "function(r) return pool(r) end"
	luaRoute    = "function(r) local res = pool(r) return res end"
)

// luaFile writes a route file whose backends are the given servers, as
// "b1", "b2", ... in one pool, attached to every key command with
// `return pool(r)`.
func luaFile(t testing.TB, servers ...*testserver.Server) string {
	return luaFileWith(t, directRoute, servers...)
}

// luaFileWith is luaFile with another handler.
func luaFileWith(t testing.TB, handler string, servers ...*testserver.Server) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("function mcp_config_pools()\n  return mcp.pool({\n")
	for i, s := range servers {
		fmt.Fprintf(&b, "    mcp.backend(\"b%d\", \"127.0.0.1\", %d),\n", i+1, s.Port)
	}
	b.WriteString("  })\nend\nfunction mcp_config_routes(pool)\n" +
		"  mcp.attach(mcp.CMD_ANY_STORAGE, " + handler + ")\nend\n")
	return writeLua(t, b.String())
}

// v2DirectRoute writes a V2 route file: one function generator whose
// handler enqueue_and_waits every key command to one pool of srv (the
// route bench/fleet.go measures).
func v2DirectRoute(t testing.TB, srv *testserver.Server) string {
	t.Helper()
	return writeLua(t, fmt.Sprintf(`function mcp_config_pools()
    return { main = mcp.pool({ mcp.backend("b1", "127.0.0.1", %d) }) }
end
local function direct_gen(rctx, handle)
    return function(r) return rctx:enqueue_and_wait(r, handle) end
end
function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local handle = fgen:new_handle(pools.main)
    fgen:ready({ n = "direct", f = direct_gen, a = handle })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
`, srv.Port))
}

func writeLua(t testing.TB, src string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "routes.lua")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestLuaPool runs a Lua pool end to end: the YAML names the route file,
// key commands reach memcached, a multi-get is answered in key order,
// noreply and quiet mode hide what they hide, local commands stay local.
func TestLuaPool(t *testing.T) {
	mc := testserver.StartMemcached(t)
	_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+luaFile(t, mc)+"\n", "lp")
	c := dial(t, addr)
	mcVersion := dial(t, mc.Addr).do("version\r\n")
	for _, tc := range []struct{ req, want string }{
		{"set a 0 0 1\r\nx\r\n", "STORED\r\n"},
		{"set b 0 0 2 noreply\r\nyy\r\nget b a c b\r\n", "VALUE b 0 2\r\nyy\r\nVALUE a 0 1\r\nx\r\nVALUE b 0 2\r\nyy\r\nEND\r\n"},
		{"mg c v q\r\nmn\r\n", "MN\r\n"},
		{"ms c 1 q\r\nz\r\nmg c v\r\n", "VA 1\r\nz\r\n"},
		{"version\r\n", mcVersion}, // a memcached release, as memcached's proxy answers: its servers'
		// the pool's own cache, as memcached's proxy answers from its storage
		{"stats slabs\r\n", "STAT 1:used_chunks 0\r\nSTAT 1:get_hits 0\r\nSTAT 1:cmd_set 0\r\nSTAT active_slabs 1\r\nSTAT total_malloced 0\r\nEND\r\n"},
		{"delete a\r\n", "DELETED\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	if v, ok := direct(t, mc.Addr, "b"); !ok || v != "yy" {
		t.Errorf("memcached has b=%q (%v)", v, ok)
	}
}

// TestLuaConfigError checks that a route file that does not load stops the
// proxy from starting, with the file and line in the error.
func TestLuaConfigError(t *testing.T) {
	file := writeLua(t, "function mcp_config_pools()\n  return mcp.pool({ mcp.backend('b1', '127.0.0.1', 1) }, { dist = 'nope' })\nend\n"+
		"function mcp_config_routes(p) end\n")
	cfg, err := config.Parse([]byte("lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n"), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = proxy.New(cfg, proxy.Options{})
	var ce *lua.ConfigError
	if !errors.As(err, &ce) || ce.File != file || ce.Line != 2 {
		t.Fatalf("got %v, want a *lua.ConfigError for %s line 2", err, file)
	}
	want := fmt.Sprintf(`proxy: pool "lp": lua: %s:2: mcp_config_pools: pool: dist must be one of`, file)
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got  %v\nwant %s...", err, want)
	}
	cfg.Pools[0].Lua = filepath.Join(t.TempDir(), "missing.lua")
	if _, err := proxy.New(cfg, proxy.Options{}); err == nil || !strings.Contains(err.Error(), "missing.lua") {
		t.Errorf("a missing route file: %v", err)
	}
}

// TestLuaStartArg checks that the pool's lua_arg reaches the route file as
// mcp.start_arg.
func TestLuaStartArg(t *testing.T) {
	file := writeLua(t, "function mcp_config_pools() return {} end\n"+
		"function mcp_config_routes(p)\n"+
		"  mcp.attach(mcp.CMD_MG, function(r) return \"HD \" .. mcp.start_arg .. \"\\r\\n\" end)\nend\n")
	_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n  lua_arg: hello\n", "lp")
	if got := dial(t, addr).do("mg k\r\n"); got != "HD hello\r\n" {
		t.Errorf("got %q, want %q", got, "HD hello\r\n")
	}
}

// TestLuaReloadStopsCrons checks that a reload retires the old router's
// crons: after three reloads of a file with a cron, one cron goroutine is
// left.
func TestLuaReloadStopsCrons(t *testing.T) {
	file := writeLua(t, "function mcp_config_pools()\n"+
		"  mcp.register_cron('tick', { every = 1, func = function() ticks = (ticks or 0) + 1 end })\n"+
		"  return {}\nend\n"+
		"function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_MG, function(r) return \"HD\\r\\n\" end)\nend\n")
	cfg, err := config.Parse([]byte("lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n"), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	for range 3 {
		if err := srv.Reload(cfg); err != nil {
			t.Fatalf("reload: %v", err)
		}
	}
	crons := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "lua.(*Router).runCrons(")
	}
	deadline := time.Now().Add(5 * time.Second)
	for crons() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d cron goroutines after three reloads, want 1", crons())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLuaPoolYAMLOptions checks that the pool's YAML timeout becomes the
// backends' read timeout.
func TestLuaPoolYAMLOptions(t *testing.T) {
	hang := hangServer(t, true) // answers the handshake, then never again
	_, port, _ := net.SplitHostPort(hang)
	file := writeLua(t, fmt.Sprintf(`
function mcp_config_pools()
  return mcp.pool({ mcp.backend("hang", "127.0.0.1", %s) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p(r) end)
end`, port))
	srv, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  timeout: 200\n  lua: "+file+"\n", "lp")
	c := dial(t, addr)
	start := time.Now()
	if got := c.do("get k\r\n"); got != "SERVER_ERROR backend failure\r\n" { // memcached proxy's words
		t.Errorf("got %q", got)
	}
	if n := srv.Stats().Pools[0].Servers[0].ServerTimedout; n != 1 {
		t.Errorf("server_timedout %d, want 1", n)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 2*time.Second {
		t.Errorf("timed out after %v, want about the YAML's 200ms", took)
	}
}

// BenchmarkLuaRoute compares the throughput of Lua routes with the native
// YAML route of the same pool: two memcached servers, jump hash over XXH3
// in all, 16 client connections pipelining 32 gets each of a 100-byte
// value. "direct" is `return pool(r)`, which the router runs without
// entering Lua; "lua" is `local res = pool(r) return res`, which runs the
// handler in a coroutine. The three run in alternating rounds, so load from
// elsewhere on the machine hits them alike; it reports requests per second
// and the median ratios to native.
func BenchmarkLuaRoute(b *testing.B) {
	m1, m2 := testserver.StartMemcached(b), testserver.StartMemcached(b)
	yaml := fmt.Sprintf("direct:\n  listen: 127.0.0.1:0\n  lua: %s\n"+
		"lua:\n  listen: 127.0.0.1:0\n  lua: %s\n"+
		"native:\n  listen: 127.0.0.1:0\n  distribution: jump\n  hash: xxh3\n  timeout: 3000\n"+
		"  servers:\n    - %s:1\n    - %s:1\n", luaFileWith(b, directRoute, m1, m2), luaFileWith(b, luaRoute, m1, m2), m1.Addr, m2.Addr)
	srv, _ := startProxy(b, yaml, "native")
	pools := []string{"native", "direct", "lua"}
	const conns, depth, rounds = 16, 32, 3
	var keys []string
	for _, name := range pools { // the pools may order the servers differently
		keys = benchKeys(b, srv.Addr(name).String(), 64)
	}
	round := time.Second
	if testing.Short() {
		round = 200 * time.Millisecond
	}
	b.ResetTimer()
	rates := map[string][]float64{}
	ratios := map[string][]float64{}
	for range b.N {
		for range rounds {
			got := map[string]float64{}
			for _, name := range pools {
				got[name] = throughput(b, srv.Addr(name).String(), keys, conns, depth, round)
				rates[name] = append(rates[name], got[name])
			}
			for _, name := range pools[1:] {
				ratios[name] = append(ratios[name], got[name]/got["native"])
			}
		}
	}
	b.StopTimer()
	for _, name := range pools {
		b.ReportMetric(median(rates[name]), name+"_req/s")
	}
	for _, name := range pools[1:] {
		b.ReportMetric(median(ratios[name]), name+"/native")
	}
	b.Logf("native %.0f req/s; direct %.0f req/s, ratio %.2f (rounds %.2f); lua %.0f req/s, ratio %.2f (rounds %.2f)",
		median(rates["native"]), median(rates["direct"]), median(ratios["direct"]), ratios["direct"],
		median(rates["lua"]), median(ratios["lua"]), ratios["lua"])
}

// benchKeys stores n keys of 100 bytes through addr and returns them.
func benchKeys(b *testing.B, addr string, n int) []string {
	c := dial(b, addr)
	val := strings.Repeat("v", 100)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench:%d", i)
		if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", keys[i], len(val), val)); got != "STORED\r\n" {
			b.Fatalf("set: %q", got)
		}
	}
	return keys
}

// throughput runs conns pipelining clients against addr for d and returns
// the gets answered per second.
func throughput(b *testing.B, addr string, keys []string, conns, depth int, d time.Duration) float64 {
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	start := time.Now()
	deadline := start.Add(d)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer nc.Close()
			var batch strings.Builder
			for j := range depth {
				fmt.Fprintf(&batch, "get %s\r\n", keys[(i*depth+j)%len(keys)])
			}
			r := bufio.NewReaderSize(nc, 64<<10)
			done := 0
			for time.Now().Before(deadline) {
				if _, err := io.WriteString(nc, batch.String()); err != nil {
					b.Error(err)
					return
				}
				nc.SetReadDeadline(time.Now().Add(10 * time.Second))
				for range depth {
					if err := readGet(r); err != nil {
						b.Error(err)
						return
					}
				}
				done += depth
			}
			mu.Lock()
			total += done
			mu.Unlock()
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// readGet reads one hit of a 100-byte value.
func readGet(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "VALUE ") {
		return fmt.Errorf("reply %q", line)
	}
	if _, err := r.Discard(100 + 2 + len("END\r\n")); err != nil {
		return err
	}
	return nil
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestLuaReload checks that a reload with a route file that does not load
// is refused and keeps the running routes, and that a good one replaces
// them.
func TestLuaReload(t *testing.T) {
	file := filepath.Join(t.TempDir(), "routes.lua")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	routes := func(answer string) string {
		return "function mcp_config_pools() return {} end\n" +
			"function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_MG, function(r) return \"HD " + answer + "\\r\\n\" end)\nend\n"
	}
	write(routes("one"))
	yaml := fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n", testserver.FreePort(t), file)
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	addr := srv.Addr("lp").String()
	if got := dial(t, addr).do("mg k\r\n"); got != "HD one\r\n" {
		t.Fatalf("first routes: %q", got)
	}
	write(routes("two") + "function broken(\n")
	err = srv.Reload(cfg)
	var ce *lua.ConfigError
	if !errors.As(err, &ce) || ce.Line != 5 {
		t.Fatalf("reload with a broken file: %v", err)
	}
	if got := dial(t, addr).do("mg k\r\n"); got != "HD one\r\n" {
		t.Errorf("after a refused reload: %q", got)
	}
	write(routes("two"))
	if err := srv.Reload(cfg); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if got := dial(t, srv.Addr("lp").String()).do("mg k\r\n"); got != "HD two\r\n" {
		t.Errorf("after the reload: %q", got)
	}
}

// TestLuaReloadUnsupported checks that a reload with a route file calling
// what shardproxy lacks (os.execute) is refused with the function, the
// file and the line in the error and the log, and that the running routes
// keep answering.
func TestLuaReloadUnsupported(t *testing.T) {
	file := filepath.Join(t.TempDir(), "routes.lua")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("function mcp_config_pools() return {} end\n" +
		"function mcp_config_routes(p)\n  mcp.attach(mcp.CMD_MG, function(r) return \"HD v1\\r\\n\" end)\nend\n")
	yaml := fmt.Sprintf("lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n", testserver.FreePort(t), file)
	srv, logs := startLoggedProxy(t, yaml, "test.yml")
	addr := srv.Addr("lp").String()
	c := dial(t, addr)
	if got := c.do("mg k\r\n"); got != "HD v1\r\n" {
		t.Fatalf("first routes: %q", got)
	}
	write("function mcp_config_pools() return {} end\n" +
		"function mcp_config_routes(p)\n" +
		"  local res = os.execute({ limit = 10, fillrate = 5, tickrate = 10 })\n" + // line 3
		"  mcp.attach(mcp.CMD_MG, function(r) return \"HD v2\\r\\n\" end)\nend\n")
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Reload(cfg)
	want := fmt.Sprintf(`proxy: pool "lp": lua: %s:3: mcp_config_routes: os.execute is not available in shardproxy route files`, file)
	var ce *lua.ConfigError
	if !errors.As(err, &ce) || ce.File != file || ce.Line != 3 || err.Error() != want {
		t.Fatalf("reload: got  %v\nwant %s", err, want)
	}
	if !strings.Contains(logs.String(), "os.execute is not available in shardproxy route files") ||
		!strings.Contains(logs.String(), fmt.Sprintf("%s:3:", file)) {
		t.Errorf("the log lacks the error:\n%s", logs)
	}
	if got := c.do("mg k\r\n"); got != "HD v1\r\n" {
		t.Errorf("after the refused reload, on the same connection: %q", got)
	}
	if got := dial(t, addr).do("mg k\r\n"); got != "HD v1\r\n" {
		t.Errorf("after the refused reload, on a new connection: %q", got)
	}
}

// TestLuaPoolYAMLDefaultsSet: a key the file sets is the script's default
// even when its value is the YAML default: server_failure_limit: 2 marks a
// backend bad after two failures, where memcached's own default is three.
func TestLuaPoolYAMLDefaultsSet(t *testing.T) {
	port := testserver.FreePort(t) // nothing listens: every connect fails
	file := writeLua(t, fmt.Sprintf(`
function mcp_config_pools()
  return mcp.pool({ mcp.backend("down", "127.0.0.1", %d) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p(r) end)
end`, port))
	yaml := "lp:\n  listen: 127.0.0.1:0\n  server_failure_limit: 2\n  server_retry_timeout: 30000\n  preconnect: false\n  lua: " + file + "\n"
	srv, addr := startProxy(t, yaml, "lp")
	c := dial(t, addr)
	var ejects []int64
	for range 3 {
		if got := c.do("get k\r\n"); got != "SERVER_ERROR backend failure\r\n" {
			t.Errorf("get to a backend that refuses connections: %q", got)
		}
		ejects = append(ejects, srv.Stats().Pools[0].ServerEjects)
	}
	if want := []int64{0, 1, 1}; !slices.Equal(ejects, want) {
		t.Errorf("server_ejects after each of three gets: %v, want %v", ejects, want)
	}
}

// TestLuaServerProtocolMeta checks server_protocol: meta on a Lua pool: a
// one-key get or gets that a route forwards untouched (V1 `return pool(r)`,
// V2 `return rctx:enqueue_and_wait(r, h)`) reaches the server as mg and the
// client reads memcached's text reply; a route that reads the reply sends
// the get as it is; the backends are validated with "mn".
func TestLuaServerProtocolMeta(t *testing.T) {
	lines := make(chan string, 16)
	addr := metaServer(t, "MN\r\n", map[string]string{
		"mg d/foo k f v\r\n":   "VA 3 kd/foo f5\r\nbar\r\n",
		"mg d/foo k f c v\r\n": "VA 3 kd/foo f5 c42\r\nbar\r\n",
		"mg d/no k f v\r\n":    "EN kd/no\r\n",
		"get l/foo\r\n":        "VALUE l/foo 5 3\r\nbar\r\nEND\r\n",
		"mg v1/foo k f v\r\n":  "VA 3 kv1/foo f5\r\nbar\r\n",
		"delete d/foo\r\n":     "DELETED\r\n",
	}, lines)
	_, port, _ := net.SplitHostPort(addr)
	v2 := writeLua(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", `+port+`) })
end
function mcp_config_routes(p)
  local direct = mcp.funcgen_new()
  local dh = direct:new_handle(p)
  direct:ready({ n = "direct", f = function(rctx)
    return function(r) return rctx:enqueue_and_wait(r, dh) end
  end })
  local looks = mcp.funcgen_new()
  local lh = looks:new_handle(p)
  looks:ready({ n = "looks", f = function(rctx)
    return function(r)
      local res = rctx:enqueue_and_wait(r, lh)
      if res:hit() then return res end
      return res
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, mcp.router_new({ map = { d = direct, l = looks }, mode = "prefix", stop = "/" }))
end
`)
	v1 := writeLua(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", `+port+`) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return p(r) end)
end
`)
	yaml := "v2:\n  listen: 127.0.0.1:0\n  server_protocol: meta\n  lua: " + v2 + "\n" +
		"v1:\n  listen: 127.0.0.1:0\n  server_protocol: meta\n  lua: " + v1 + "\n"
	srv, _ := startProxy(t, yaml, "v2")
	for _, s := range []struct{ pool, req, sent, want string }{
		{"v2", "get d/foo\r\n", "mg d/foo k f v\r\n", "VALUE d/foo 5 3\r\nbar\r\nEND\r\n"},
		{"v2", "gets d/foo\r\n", "mg d/foo k f c v\r\n", "VALUE d/foo 5 3 42\r\nbar\r\nEND\r\n"},
		{"v2", "get d/no\r\n", "mg d/no k f v\r\n", "END\r\n"},
		{"v2", "delete d/foo\r\n", "delete d/foo\r\n", "DELETED\r\n"},
		{"v2", "get l/foo\r\n", "get l/foo\r\n", "VALUE l/foo 5 3\r\nbar\r\nEND\r\n"},
		{"v1", "get v1/foo\r\n", "mg v1/foo k f v\r\n", "VALUE v1/foo 5 3\r\nbar\r\nEND\r\n"},
	} {
		c := dial(t, srv.Addr(s.pool).String())
		if got := c.do(s.req); got != s.want {
			t.Errorf("%s %q: got %q, want %q", s.pool, s.req, got, s.want)
		}
		select {
		case sent := <-lines:
			if sent != s.sent {
				t.Errorf("%s %q: the server was sent %q, want %q", s.pool, s.req, sent, s.sent)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %q: the server was sent nothing", s.pool, s.req)
		}
	}
}

// TestLuaServerProtocolAuto checks server_protocol: auto on a Lua pool: a
// get the route forwards untouched goes as mg to a backend whose server
// answered "mn", and as the client wrote it to one that answered ERROR
// (memcached before 1.6); the client reads the same text reply from both.
func TestLuaServerProtocolAuto(t *testing.T) {
	metaLines, textLines := make(chan string, 16), make(chan string, 16)
	meta := metaServer(t, "MN\r\n", map[string]string{"mg m/foo k f v\r\n": "VA 3 km/foo f5\r\nbar\r\n"}, metaLines)
	text := metaServer(t, "ERROR\r\n", map[string]string{"get t/foo\r\n": "VALUE t/foo 5 3\r\nbar\r\nEND\r\n"}, textLines)
	_, mport, _ := net.SplitHostPort(meta)
	_, tport, _ := net.SplitHostPort(text)
	routes := writeLua(t, `
function mcp_config_pools()
  return { m = mcp.pool({ mcp.backend("m", "127.0.0.1", `+mport+`) }),
           t = mcp.pool({ mcp.backend("t", "127.0.0.1", `+tport+`) }) }
end
function mcp_config_routes(p)
  local fm, ft = mcp.funcgen_new(), mcp.funcgen_new()
  local hm, ht = fm:new_handle(p.m), ft:new_handle(p.t)
  fm:ready({ n = "m", f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, hm) end end })
  ft:ready({ n = "t", f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, ht) end end })
  mcp.attach(mcp.CMD_ANY_STORAGE, mcp.router_new({ map = { m = fm, t = ft }, mode = "prefix", stop = "/" }))
end
`)
	srv, _ := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  server_protocol: auto\n  lua: "+routes+"\n", "lp")
	c := dial(t, srv.Addr("lp").String())
	for _, s := range []struct {
		req, sent, want string
		lines           chan string
	}{
		{"get m/foo\r\n", "mg m/foo k f v\r\n", "VALUE m/foo 5 3\r\nbar\r\nEND\r\n", metaLines},
		{"get t/foo\r\n", "get t/foo\r\n", "VALUE t/foo 5 3\r\nbar\r\nEND\r\n", textLines},
	} {
		if got := c.do(s.req); got != s.want {
			t.Errorf("%q: got %q, want %q", s.req, got, s.want)
		}
		select {
		case sent := <-s.lines:
			if sent != s.sent {
				t.Errorf("%q: the server was sent %q, want %q", s.req, sent, s.sent)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q: the server was sent nothing", s.req)
		}
	}
}
