package lua_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The V2 API (function generators, request contexts, routers) end to end:
// the route files of examples/lua, unchanged but for their ports, in front
// of real memcached servers.

// exampleRoutes loads examples/lua/name with each literal port in ports
// replaced by the port of the server started for it, and starts a proxy.
func exampleRoutes(t *testing.T, name string, ports map[int]int) (string, *logBuffer) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "lua", name))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	for from, to := range ports {
		re := regexp.MustCompile(`\b` + strconv.Itoa(from) + `\b`)
		if !re.MatchString(src) {
			t.Fatalf("%s does not mention port %d", name, from)
		}
		src = re.ReplaceAllString(src, strconv.Itoa(to))
	}
	return startLua(t, writeRoutes(t, src), "")
}

func setReq(key, value string) string {
	return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", key, len(value), value)
}

func TestV2Basic(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := exampleRoutes(t, "v2_basic.lua", map[int]int{11211: mc[0].Port})
	c := dial(t, addr)
	if got := c.do(setReq("k1", "hello")); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	if v, ok := get(t, mc[0].Addr, "k1"); !ok || v != "hello" {
		t.Fatalf("backend has %q %v", v, ok)
	}
	if got := c.do("get k1\r\n"); got != valueReply("k1", "hello") {
		t.Errorf("get: %q", got)
	}
	if got := c.do("get nope\r\n"); got != "END\r\n" {
		t.Errorf("get miss: %q", got)
	}
	if got := c.do("mg k1 v\r\n"); got != "VA 5\r\nhello\r\n" {
		t.Errorf("mg: %q", got)
	}
	// a multi-get runs the handler per key, each in a request context of its own
	if got := c.do("get k1 nope k1\r\n"); got != "VALUE k1 0 5\r\nhello\r\nVALUE k1 0 5\r\nhello\r\nEND\r\n" {
		t.Errorf("multi-get: %q", got)
	}
}

// Many requests in flight at once each get a request context of their own.
func TestV2Pipelined(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 20*time.Millisecond)
	addr, _ := exampleRoutes(t, "v2_basic.lua", map[int]int{11211: slow})
	c := dial(t, addr)
	var b strings.Builder
	for i := range 50 {
		b.WriteString(setReq(fmt.Sprintf("p%d", i), strconv.Itoa(i)))
	}
	c.send(b.String())
	for i := range 50 {
		if got := c.reply(); got != "STORED\r\n" {
			t.Fatalf("set %d: %q", i, got)
		}
	}
	b.Reset()
	for i := range 50 {
		fmt.Fprintf(&b, "get p%d\r\n", i)
	}
	c.send(b.String())
	for i := range 50 {
		if got := c.reply(); got != valueReply(fmt.Sprintf("p%d", i), strconv.Itoa(i)) {
			t.Fatalf("get %d: %q", i, got)
		}
	}
}

func TestV2Failover(t *testing.T) {
	mc := memcached(t, 1)
	dead := closedPort(t)
	addr, _ := exampleRoutes(t, "v2_failover.lua", map[int]int{11311: dead, 11312: mc[0].Port})
	c := dial(t, addr)
	if got := c.do(setReq("f1", "x")); got != "STORED\r\n" {
		t.Fatalf("set through a dead primary: %q", got)
	}
	if v, ok := get(t, mc[0].Addr, "f1"); !ok || v != "x" {
		t.Fatalf("secondary has %q %v", v, ok)
	}
	if got := c.do("get f1\r\n"); got != valueReply("f1", "x") {
		t.Errorf("get: %q", got)
	}
}

// A live primary that misses: the secondary answers.
func TestV2FailoverOnMiss(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_failover.lua", map[int]int{11311: mc[0].Port, 11312: mc[1].Port})
	set(t, mc[1].Addr, "only2", "two")
	set(t, mc[0].Addr, "both", "one")
	set(t, mc[1].Addr, "both", "two")
	c := dial(t, addr)
	if got := c.do("get only2\r\n"); got != valueReply("only2", "two") {
		t.Errorf("get only2: %q", got)
	}
	if got := c.do("get both\r\n"); got != valueReply("both", "one") {
		t.Errorf("get both: %q", got)
	}
}

func TestV2AllAndFastest(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_allfastest.lua", map[int]int{11411: mc[0].Port, 11412: mc[1].Port})
	c := dial(t, addr)
	// enqueue to two pools + wait_cond(2, WAIT_ANY) + res_any
	if got := c.do(setReq("r1", "v")); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	for i, s := range mc {
		if v, ok := get(t, s.Addr, "r1"); !ok || v != "v" {
			t.Errorf("server %d has %q %v", i, v, ok)
		}
	}
	// wait_cond(1, WAIT_GOOD) over two handles
	if got := c.do("get r1\r\n"); got != valueReply("r1", "v") {
		t.Errorf("get: %q", got)
	}
	set(t, mc[1].Addr, "on2", "b")
	if got := c.do("get on2\r\n"); got != valueReply("on2", "b") {
		t.Errorf("get of a key on the second pool only: %q", got)
	}
	if got := c.do("get none\r\n"); got != "END\r\n" {
		t.Errorf("miss everywhere: %q", got)
	}
}

// WAIT_GOOD returns at the first hit: a slow pool does not hold it up.
func TestV2FastestDoesNotWait(t *testing.T) {
	mc := memcached(t, 2)
	slow := delayRelay(t, mc[0].Addr, 500*time.Millisecond)
	addr, _ := exampleRoutes(t, "v2_allfastest.lua", map[int]int{11411: slow, 11412: mc[1].Port})
	set(t, mc[0].Addr, "k", "slow")
	set(t, mc[1].Addr, "k", "fast")
	c := dial(t, addr)
	got, took := c.timed("get k\r\n")
	if got != valueReply("k", "fast") {
		t.Errorf("get: %q", got)
	}
	if took > 400*time.Millisecond {
		t.Errorf("took %v: waited for the slow pool", took)
	}
	// the late reply comes back to a request context that has answered; the
	// next requests are served normally
	if got := c.do("get k\r\n"); got != valueReply("k", "fast") {
		t.Errorf("second get: %q", got)
	}
}

func TestV2Router(t *testing.T) {
	mc := memcached(t, 2)
	addr, _ := exampleRoutes(t, "v2_router.lua", map[int]int{11511: mc[0].Port, 11512: mc[1].Port})
	c := dial(t, addr)
	for _, tc := range []struct {
		req, want string
	}{
		{setReq("users/1", "u"), "STORED\r\n"},
		{setReq("items/1", "i"), "STORED\r\n"},
		{setReq("other/1", "o"), "SERVER_ERROR no route for this key\r\n"},
		{setReq("noslash", "o"), "SERVER_ERROR no route for this key\r\n"},
		{setReq("/users", "o"), "SERVER_ERROR no route for this key\r\n"}, // empty prefix
		{"get users/1\r\n", valueReply("users/1", "u")},
		// anchor mode: "/" + name + "/"
		{"ms /users/2 1\r\nU\r\n", "HD\r\n"},
		{"mg /users/2 v\r\n", "VA 1\r\nU\r\n"},
		{"mg users/1 v\r\n", "SERVER_ERROR lua start failure\r\n"}, // no anchor, no default
		{"mg /nobody/1 v\r\n", "SERVER_ERROR lua start failure\r\n"},
		{"mg /users v\r\n", "SERVER_ERROR lua start failure\r\n"}, // no stop
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	if _, ok := get(t, mc[0].Addr, "users/1"); !ok {
		t.Error("users/1 is not on the users pool")
	}
	if _, ok := get(t, mc[1].Addr, "items/1"); !ok {
		t.Error("items/1 is not on the items pool")
	}
	if _, ok := get(t, mc[0].Addr, "/users/2"); !ok {
		t.Error("/users/2 is not on the users pool")
	}
}

// A file mixing V1 handlers (pool(r)) and V2 generators.
func TestV2WithV1(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", {{MC}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r) return p(r) end) -- V1
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, h) end end })
  mcp.attach(mcp.CMD_SET, fg)
end`, map[string]int{"MC": mc[0].Port}, "")
	c := dial(t, addr)
	if got := c.do(setReq("k", "v")); got != "STORED\r\n" {
		t.Fatalf("set (V2): %q", got)
	}
	if got := c.do("get k\r\n"); got != valueReply("k", "v") {
		t.Errorf("get (V1): %q", got)
	}
}
