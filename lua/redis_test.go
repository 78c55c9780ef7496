package lua_test

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// respClient is a minimal Redis client: commands go out as RESP arrays,
// replies come back rendered as one line ("+OK", "$3 abc", "$-1", ":1",
// "-ERR ...", "*2 [$1 a $-1]").
type respClient struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialRESP(t testing.TB, addr string) *respClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &respClient{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *respClient) do(args ...string) string {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write([]byte(b.String())); err != nil {
		c.t.Fatal(err)
	}
	return c.read()
}

func (c *respClient) read() string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return line
		}
		buf := make([]byte, n+2)
		if _, err := io_ReadFull(c.r, buf); err != nil {
			c.t.Fatal(err)
		}
		return line + " " + string(buf[:n])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		parts := make([]string, 0, n)
		for range n {
			parts = append(parts, c.read())
		}
		return line + " [" + strings.Join(parts, " ") + "]"
	}
	return line
}

func io_ReadFull(r *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// redisGet reads key from a redis-server directly.
func redisGet(t testing.TB, addr, key string) string {
	t.Helper()
	return dialRESP(t, addr).do("GET", key)
}

// TestRedisPool runs the same API on a Redis pool: r:command() is the
// lower-case command name and mcp.CMD_GET is "get", r:key() the first key,
// r:token(n) the n-th argument; responses classify RESP replies.
func TestRedisPool(t *testing.T) {
	rs := []*testserver.Server{testserver.StartRedis(t), testserver.StartRedis(t)}
	addr, logs := luaRoutes(t, `
function mcp_config_pools()
  return {
    a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{A}}) }),
    b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) }),
  }
end

local function describe(res)
  return string.format("ok=%s hit=%s code=%d vlen=%d line=%s",
    tostring(res:ok()), tostring(res:hit()), res:code(), res:vlen(), tostring(res:line()))
end

function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return p.a(r) end)
  -- writes go to both pools; the client gets pool a's answer
  mcp.attach(mcp.CMD_SET, function(r)
    local res = mcp.await(r, { p.a, p.b }, 2, mcp.AWAIT_OK)
    for _, x in ipairs(res) do
      if x:ok() then return x end
    end
    return res[1]
  end)
  mcp.attach("echo", function(r) return "+echo\r\n" end)
  mcp.attach(mcp.CMD_HGET, function(r)
    local key = r:key()
    if key == "inspect" then
      return string.format("+cmd=%s is_hget=%s key=%s n=%d t1=%s t3=%s t9=%s flag=%s\r\n",
        r:command(), tostring(r:command() == mcp.CMD_HGET), key, r:ntokens(), r:token(1),
        r:token(3), tostring(r:token(9)), tostring(r:has_flag("v")))
    end
    local res = p.a(mcp.request("GET " .. key))
    return "+" .. describe(res) .. "\r\n"
  end)
  mcp.attach(mcp.CMD_APPEND, function(r)
    r:ltrimkey(4)        -- "pfx:key" -> "key"
    r:token(3, "rewritten")
    return p.b(r)
  end)
  mcp.attach(mcp.CMD_INCR, function(r)
    local res = p.a(r)
    return "+" .. describe(res) .. "\r\n"
  end)
end`, map[string]int{"A": rs[0].Port, "B": rs[1].Port}, "  redis: true\n")
	c := dialRESP(t, addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"SET", "k", "v1"}, "+OK"},
		{[]string{"GET", "k"}, "$2 v1"},
		{[]string{"GET", "missing"}, "$-1"},
		{[]string{"hget", "inspect", "field"}, "+cmd=hget is_hget=true key=inspect n=3 t1=hget t3=field t9=nil flag=false"},
		{[]string{"HGET", "k", "x"}, "+ok=true hit=true code=15 vlen=2 line=$2"},
		{[]string{"HGET", "missing", "x"}, "+ok=true hit=false code=17 vlen=0 line=$-1"},
		{[]string{"INCR", "k"}, "+ok=false hit=false code=21 vlen=0 line=-ERR value is not an integer or out of range"},
		{[]string{"INCR", "n"}, "+ok=true hit=true code=15 vlen=0 line=:1"},
		{[]string{"APPEND", "pfx:app", "original"}, ":9"},
		{[]string{"MGET", "k", "missing", "k"}, "*3 [$2 v1 $-1 $2 v1]"},
		{[]string{"ECHO", "hi"}, "$2 hi"}, // answered by the proxy, not routed
		{[]string{"PING"}, "+PONG"},
		// routes build requests and read replies in RESP2: the session stays there
		{[]string{"HELLO", "3"}, "-NOPROTO unsupported protocol version"},
		{[]string{"HGET", "k", "x"}, "+ok=true hit=true code=15 vlen=2 line=$2"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.args, got, tc.want)
		}
	}
	for i, r := range rs {
		if got := redisGet(t, r.Addr, "k"); got != "$2 v1" {
			t.Errorf("server %d: k = %q (SET replicated to both pools)", i, got)
		}
	}
	if got := redisGet(t, rs[1].Addr, "app"); got != "$9 rewritten" {
		t.Errorf("APPEND rewritten by ltrimkey and token: %q", got)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// TestRedisAwait runs mcp.await on Redis pools: a fast one, a slow one and
// a failing one. "GET <pools>:<mode>:<key>" awaits "GET key" and answers
// "+n=<results> hits=<hits> ok=<oks>".
func TestRedisAwait(t *testing.T) {
	const delay = 300 * time.Millisecond
	fast, slowServer := testserver.StartRedis(t), testserver.StartRedis(t)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  mcp.backend_failure_limit(0)
  return {
    fast = mcp.pool({ mcp.backend("fast", "127.0.0.1", {{FAST}}) }),
    slow = mcp.pool({ mcp.backend("slow", "127.0.0.1", {{SLOW}}) }),
    fail = mcp.pool({ mcp.backend("fail", "127.0.0.1", {{FAIL}}) }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    local names, mode, key = string.match(r:key(), "^(.-):(.-):(.*)$")
    local pools = {}
    for name in string.gmatch(names, "[^,]+") do pools[#pools + 1] = p[name] end
    local res = mcp.await(mcp.request("GET " .. key), pools, 1, mcp["AWAIT_" .. mode])
    local hits, oks = 0, 0
    for _, x in ipairs(res) do
      if x:hit() then hits = hits + 1 end
      if x:ok() then oks = oks + 1 end
    end
    return string.format("+n=%d hits=%d ok=%d\r\n", #res, hits, oks)
  end)
end`, map[string]int{"FAST": fast.Port, "SLOW": delayRelay(t, slowServer.Addr, delay), "FAIL": closedPort(t)}, "  redis: true\n")
	dialRESP(t, fast.Addr).do("SET", "hit", "1")
	dialRESP(t, slowServer.Addr).do("SET", "hit", "2")
	c := dialRESP(t, addr)
	c.do("GET", "fast,slow,fail:ANY:warm")
	for _, tc := range []struct {
		key, want string
		slow      bool
	}{
		{"slow,fast:GOOD:miss", "+n=2 hits=0 ok=2", true}, // a nil is a miss: wait for more
		{"slow,fast:GOOD:hit", "+n=1 hits=1 ok=1", false},
		{"fail,slow:OK:hit", "+n=2 hits=1 ok=1", true}, // an error is not ok
		{"fail,slow:ANY:hit", "+n=1 hits=0 ok=0", false},
		{"slow,fast:FIRST:hit", "+n=1 hits=1 ok=1", true},
		{"slow,fast:FASTGOOD:hit", "+n=1 hits=1 ok=1", false},
		{"slow,fast:BACKGROUND:hit", "+n=0 hits=0 ok=0", false},
	} {
		start := time.Now()
		got := c.do("GET", tc.key)
		took := time.Since(start)
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.key, got, tc.want)
		}
		if tc.slow != (took >= delay) {
			t.Errorf("%s: took %v (slow pool %v)", tc.key, took, delay)
		}
	}
}
