package lua_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// routelibEnv names the routelib.lua the routelib tests run.
const routelibEnv = "SHARDPROXY_ROUTELIB"

// routelibPath returns routelib.lua's path from SHARDPROXY_ROUTELIB, or
// skips the test saying how to get it.
func routelibPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv(routelibEnv)
	if p == "" {
		t.Skip(routelibEnv + " is not set: set it to memcached's routelib.lua (in memcached's source, " +
			"vendor/routelib/routelib.lua after vendor/fetch.sh; or lib/routelib/routelib.lua of " +
			"github.com/memcached/memcached-proxylibs), or run make test ROUTELIB=PATH")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s: %v", routelibEnv, err)
	}
	return p
}

// routelibConfig writes examples/lua/name with each literal port in ports
// replaced, and starts a proxy running routelib.lua with it as lua_arg.
func routelibConfig(t *testing.T, lib, name string, ports map[int]int) (string, *logBuffer) {
	t.Helper()
	src := withPorts(t, filepath.Join("..", "examples", "lua", name), ports)
	conf := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(conf, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return startLua(t, lib, "  lua_arg: "+conf+"\n")
}

// TestRoutelib runs examples/lua/routelib_config.lua with memcached's
// routelib.lua, unchanged: what the client sees and what reaches each
// backend is what memcached 1.6.45's proxy gives with the same files
// (-o proxy_config=routelib,proxy_arg=routelib_config.lua).
func TestRoutelib(t *testing.T) {
	lib := routelibPath(t)
	mc := memcached(t, 4) // main, shadow, zone z1, zone z2
	main, shadow, z1, z2 := mc[0], mc[1], mc[2], mc[3]
	addr, logs := routelibConfig(t, lib, "routelib_config.lua", map[int]int{
		11211: main.Port, 11212: shadow.Port, 11219: closedPort(t), 11213: z1.Port, 11214: z2.Port})
	set(t, shadow.Addr, "split/sh", "sh")
	set(t, z2.Addr, "zone/z2", "z2")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"set direct/a 0 0 1\r\nd\r\n", "STORED\r\n"},
		{"get direct/a\r\n", "VALUE direct/a 0 1\r\nd\r\nEND\r\n"},
		{"set failover/a 0 0 1\r\nf\r\n", "STORED\r\n"}, // dead fails, main answers
		{"get failover/a\r\n", "VALUE failover/a 0 1\r\nf\r\nEND\r\n"},
		{"mg failover/x v\r\n", "EN\r\n"},
		{"set fastest/a 0 0 1\r\nq\r\n", "STORED\r\n"},
		{"get fastest/a\r\n", "VALUE fastest/a 0 1\r\nq\r\nEND\r\n"},
		{"get fastest/none\r\n", "END\r\n"},
		{"set sync/a 0 0 1\r\ny\r\n", "STORED\r\n"},
		{"delete sync/none\r\n", "NOT_FOUND\r\n"},
		{"set split/a 0 0 1\r\ns\r\n", "STORED\r\n"},
		{"get split/sh\r\n", "END\r\n"}, // main answers
		{"set zone/a 0 0 1\r\nz\r\n", "STORED\r\n"},
		{"get zone/z2\r\n", "VALUE zone/z2 0 2\r\nz2\r\nEND\r\n"}, // a miss in z1, then z2
		{"get zone/none\r\n", "END\r\n"},
		{"set ttl/a 0 0 1\r\nt\r\n", "STORED\r\n"},
		{"mg ttl/a v\r\n", "SERVER_ERROR invalid command for route_ttl\r\n"},
		{"ms ttl/m 1 T5\r\nm\r\n", "HD\r\n"}, // the T flag replaced
		{"add ttl/o 0 0 1\r\no\r\n", "STORED\r\n"},
		{"set random/a 0 0 1\r\nr\r\n", "STORED\r\n"},
		{"set nested/a 0 0 1\r\nn\r\n", "STORED\r\n"},
		{"get nested/a\r\n", "VALUE nested/a 0 1\r\nn\r\nEND\r\n"},
		{"set other 0 0 1\r\no\r\n", "STORED\r\n"},
		{"get direct/a failover/a other\r\n", "VALUE direct/a 0 1\r\nd\r\nVALUE failover/a 0 1\r\nf\r\nVALUE other 0 1\r\no\r\nEND\r\n"},
		// route_null answers each command's empty reply
		{"get null/x\r\n", "END\r\n"},
		{"mg null/x v\r\n", "EN\r\n"},
		{"set null/y 0 0 1\r\ny\r\n", "NOT_STORED\r\n"},
		{"ms null/z 1\r\nz\r\n", "NS\r\n"},
		{"delete null/x\r\n", "NOT_FOUND\r\n"},
		{"md null/x\r\n", "NF\r\n"},
		// route_ratelim: 2 requests pass; then routelib calls its null
		// mutator on the request, which fails the request
		{"set limited/1 0 0 1\r\n1\r\n", "STORED\r\n"},
		{"set limited/2 0 0 1\r\n2\r\n", "STORED\r\n"},
		{"set limited/3 0 0 1\r\n3\r\n", "SERVER_ERROR lua failure\r\n"},
		{"mg limited/1 v\r\n", "SERVER_ERROR lua failure\r\n"},
		{"set glimited/1 0 0 1\r\n1\r\n", "STORED\r\n"},
		{"set glimited/2 0 0 1\r\n2\r\n", "STORED\r\n"},
		{"set glimited/3 0 0 1\r\n3\r\n", "SERVER_ERROR lua failure\r\n"},
		// fail_until_limit: the null answer while tokens last
		{"set inverted/1 0 0 1\r\n1\r\n", "NOT_STORED\r\n"},
		{"set inverted/2 0 0 1\r\n2\r\n", "NOT_STORED\r\n"},
		{"set inverted/3 0 0 1\r\n3\r\n", "STORED\r\n"},
		{"mg inverted/3 v\r\n", "VA 1\r\n3\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	// what reached each backend, as with memcached's proxy
	where := map[string][]int{ // key: the servers (main 0, shadow 1, z1 2, z2 3) that have it
		"direct/a": {0}, "failover/a": {0}, "fastest/a": {0, 1}, "sync/a": {0, 1}, "split/a": {0, 1},
		"zone/a": {2}, "ttl/a": {0}, "nested/a": {0, 1}, "other": {0},
		"null/y": nil, "null/z": nil, "null/x": nil, "limited/2": {0}, "limited/3": nil, "glimited/3": nil,
		"inverted/1": nil, "inverted/3": {0},
	}
	for key, want := range where {
		eventually(t, fmt.Sprint(key, " on servers ", want), func() bool {
			return slices.Equal(holders(t, mc, key), want)
		})
	}
	if in := holders(t, mc, "random/a"); len(in) != 1 || in[0] > 1 {
		t.Errorf("random/a on %v, want one of main, shadow", in)
	}
	// route_ttl set the TTL: main reports 60 seconds or a little less
	for _, key := range []string{"ttl/a", "ttl/m", "ttl/o"} {
		if got := dial(t, main.Addr).do("mg " + key + " t\r\n"); got != "HD t60\r\n" && got != "HD t59\r\n" {
			t.Errorf("%s on main: %q, want a TTL of 60", key, got)
		}
	}
	// the failures are route_ratelim's, logged
	if n, m := logs.count("level=ERROR"), logs.count("lua handler failed"); n != m || m == 0 {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// statsLines sends a stats command and returns its STAT lines.
func statsLines(c *client, cmd string) []string {
	c.t.Helper()
	c.send(cmd)
	var lines []string
	for {
		l := c.line()
		if l == "END" {
			return lines
		}
		lines = append(lines, l)
	}
}

// TestRoutelibFeatures runs examples/lua/routelib_features.lua with
// routelib.lua: settings, backend tables, a router on ":" with a command
// map and a router-wide one, failover with a retry counter and with a
// miss as failure, allfastest waiting for a hit; as memcached 1.6.45.
func TestRoutelibFeatures(t *testing.T) {
	lib := routelibPath(t)
	mc := memcached(t, 2)
	main, other := mc[0], mc[1]
	addr, logs := routelibConfig(t, lib, "routelib_features.lua", map[int]int{
		11211: main.Port, 11212: other.Port, 11219: closedPort(t)})
	for _, k := range []string{"cm:o", "miss:o", "fastmiss:o", "tch"} {
		set(t, other.Addr, k, "o")
	}
	set(t, main.Addr, "cm:m", "m")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"get cm:o\r\n", "VALUE cm:o 0 1\r\no\r\nEND\r\n"}, // get: other
		{"get cm:m\r\n", "END\r\n"},
		{"mg cm:o v\r\n", "VA 1\r\no\r\n"},
		{"set cm:s 0 0 1\r\ns\r\n", "STORED\r\n"}, // set: main
		{"delete cm:m\r\n", "DELETED\r\n"},        // not in the command map: default
		{"set retry:a 0 0 1\r\nr\r\n", "STORED\r\n"},
		{"get retry:a\r\n", "VALUE retry:a 0 1\r\nr\r\nEND\r\n"},
		{"get miss:o\r\n", "VALUE miss:o 0 1\r\no\r\nEND\r\n"},
		{"get miss:none\r\n", "END\r\n"},
		{"get fastmiss:o\r\n", "VALUE fastmiss:o 0 1\r\no\r\nEND\r\n"},
		{"touch tch 100\r\n", "TOUCHED\r\n"},  // the router's cmap
		{"touch cm:o 100\r\n", "TOUCHED\r\n"}, // the map entry has no touch: the cmap
		{"set plain/x 0 0 1\r\np\r\n", "STORED\r\n"},
		{"set local:a 0 0 1\r\nl\r\n", "STORED\r\n"}, // the proxy's own cache
		{"get local:a\r\n", "VALUE local:a 0 1\r\nl\r\nEND\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	for key, want := range map[string][]int{"cm:s": {0}, "cm:m": nil, "retry:a": {0}, "plain/x": {0}, "local:a": nil} {
		if in := holders(t, mc, key); !slices.Equal(in, want) {
			t.Errorf("%s on %v, want %v", key, in, want)
		}
	}
	for _, key := range []string{"tch", "cm:o"} {
		if got := dial(t, other.Addr).do("mg " + key + " t\r\n"); got != "HD t100\r\n" && got != "HD t99\r\n" {
			t.Errorf("%s on other: %q, want a TTL of 100", key, got)
		}
	}
	// route_failover counted one retry per request it sent to main
	found := false
	for _, l := range statsLines(c, "stats proxy\r\n") {
		found = found || l == "STAT user_retry_retries 2"
	}
	if !found {
		t.Errorf("stats proxy lacks user_retry_retries 2: %q", statsLines(c, "stats proxy\r\n"))
	}
	if logs.count("level=ERROR") != 0 {
		t.Errorf("errors logged:\n%s", logs)
	}
}
