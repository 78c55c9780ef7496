package lua_test

import (
	"bufio"
	"io"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// The V1-parity tests encode what memcached 1.6.45's proxy does with the
// same route files (observed by hand on the real thing): res:code() and
// res:line() per reply kind, its wording of malformed requests and backend
// failures, backends connected at start, empty backend labels.

// codesRoutes answers every key command with what res:code(), res:line(),
// res:ok() and res:hit() say of the backend's reply, as a SERVER_ERROR
// line; keys under refused/ go to a backend that refuses connections, v1/
// to a V1-style handler that concatenates res:line() (memcached's old
// startfile does), raw/ pass the reply on.
const codesRoutes = `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("", "127.0.0.1", {{MAIN}}) }),
    refused = mcp.pool({ mcp.backend("refused", "127.0.0.1", {{REFUSED}}) }),
  }
end

local function show(res)
  local l = res:line()
  return string.format("SERVER_ERROR code=%s line=%s ok=%s hit=%s\r\n",
    tostring(res:code()), tostring(l), tostring(res:ok()), tostring(res:hit()))
end

function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local main, refused = fg:new_handle(p.main), fg:new_handle(p.refused)
  fg:ready({ n = "codes", f = function(rctx)
    return function(r)
      local k = r:key()
      if string.find(k, "^raw/") then return rctx:enqueue_and_wait(r, main) end
      if string.find(k, "^refused/") then return show(rctx:enqueue_and_wait(r, refused)) end
      return show(rctx:enqueue_and_wait(r, main))
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
  mcp.attach(mcp.CMD_MS, function(r)
    if not string.find(r:key(), "^v1/") then return p.main(r) end
    local res = p.main(r)
    return "SERVER_ERROR line " .. res:line() .. "\r\n"
  end)
end`

// TestV1ResponseCodes: res:code() and res:line() for every reply kind and
// for a failed backend, as memcached's mcmc gives them: line() is the text
// after a meta reply's code (after VA's size), a VALUE's key, and nil for
// everything else; a failure is MCMC_CODE_SERVER_ERROR (23).
func TestV1ResponseCodes(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, codesRoutes, map[string]int{"MAIN": mc[0].Port, "REFUSED": closedPort(t)}, "")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"set a 0 0 1\r\n5\r\n", "code=8 line=nil ok=true hit=true"},
		{"add a 0 0 1\r\n5\r\n", "code=14 line=nil ok=true hit=true"},
		{"cas a 0 0 1 999\r\n5\r\n", "code=9 line=nil ok=true hit=true"},
		{"get a\r\n", "code=15 line=a ok=true hit=true"},
		{"gets a\r\n", "code=15 line=a ok=true hit=true"},
		{"get nokey\r\n", "code=17 line=nil ok=true hit=false"},
		{"incr a 10\r\n", "code=15 line=nil ok=true hit=true"},
		{"decr a 1\r\n", "code=15 line=nil ok=true hit=true"},
		{"incr nokey 1\r\n", "code=13 line=nil ok=true hit=true"},
		{"touch a 10\r\n", "code=11 line=nil ok=true hit=true"},
		{"touch nokey 10\r\n", "code=13 line=nil ok=true hit=true"},
		{"set s 0 0 1\r\nx\r\n", "code=8 line=nil ok=true hit=true"},
		{"incr s 1\r\n", "code=22 line=nil ok=false hit=false"},
		{"delete a\r\n", "code=10 line=nil ok=true hit=true"},
		{"delete a\r\n", "code=13 line=nil ok=true hit=true"},
		{"mg s v\r\n", "code=15 line=nil ok=true hit=true"},
		{"mg s s f v\r\n", "code=15 line=s1 f0 ok=true hit=true"},
		{"mg s\r\n", "code=15 line=nil ok=true hit=true"},
		{"mg s k O123 q\r\n", "code=15 line=ks O123 ok=true hit=true"},
		{"mg nokey v\r\n", "code=17 line=nil ok=true hit=false"},
		{"md nokey\r\n", "code=13 line=nil ok=true hit=true"},
		{"me s\r\n", "code=15 line=s exp=-1"},
		{"ma nokey\r\n", "code=13 line=nil ok=true hit=true"},
		{"ma n v\r\n", "code=13 line=nil ok=true hit=true"},
		{"mg refused/x v\r\n", "code=23 line=nil ok=false hit=false"},
		{"set refused/x 0 0 1\r\nx\r\n", "code=23 line=nil ok=false hit=false"},
	} {
		got := c.do(tc.req)
		if !strings.HasPrefix(got, "SERVER_ERROR "+tc.want) {
			t.Errorf("%q: got %q, want %q", tc.req, got, "SERVER_ERROR "+tc.want+"...")
		}
	}
	// ms: HD, NS, EX through the V1 handler's pool call.
	for _, tc := range []struct{ req, want string }{
		{"ms m 2\r\nhi\r\n", "HD\r\n"},
		{"ms m 2 MA C1\r\nhi\r\n", "EX\r\n"},
		{"ms nokey 2 MA\r\nhi\r\n", "NS\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TestV1StartfileMetaSet: a V1 handler that concatenates res:line() (as
// memcached's old startfile does for ms) answers an ms whose reply has
// flags; a bare HD has no line, so the concatenation fails the handler,
// as it does under memcached ("SERVER_ERROR lua failure").
func TestV1StartfileMetaSet(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, codesRoutes, map[string]int{"MAIN": mc[0].Port, "REFUSED": closedPort(t)}, "")
	for _, tc := range []struct{ req, want string }{
		{"ms v1/a 2 O77 k\r\nhi\r\n", "SERVER_ERROR line O77 kv1/a\r\n"},
		{"ms v1/a 2 c\r\nhi\r\n", "SERVER_ERROR line c"},
		{"ms v1/a 2\r\nhi\r\n", "SERVER_ERROR lua failure\r\n"},
		{"ms v1/a 2 T0\r\nhi\r\n", "SERVER_ERROR lua failure\r\n"},
	} {
		if got := dial(t, addr).do(tc.req); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// TestV1ProxyWording: a Lua pool answers malformed requests and backend
// failures in memcached proxy's words.
func TestV1ProxyWording(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, codesRoutes, map[string]int{"MAIN": mc[0].Port, "REFUSED": closedPort(t)}, "")
	for _, tc := range []struct{ req, want string }{
		{"get\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"get \r\n", "CLIENT_ERROR parsing request\r\n"},
		{"mg\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"set foo 0 0 abc\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"set foo 0 0\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"ms foo\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"ms foo abc\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"incr foo\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"touch foo\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"delete\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"\r\n", "CLIENT_ERROR parsing request\r\n"},
		{"set foo 0 0 2\r\nabcd\r\n", "CLIENT_ERROR bad data chunk\r\nCLIENT_ERROR parsing request\r\n"},
		{"mg raw/refused/x v\r\n", "EN\r\n"},
	} {
		c := dial(t, addr)
		c.send(tc.req)
		if got := c.readN(len(tc.want)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
		// the connection stays
		if got := c.do("mn\r\n"); got != "MN\r\n" {
			t.Errorf("%q: then mn: %q", tc.req, got)
		}
	}
	// Unknown commands, commands memcached's proxy does not parse and
	// over-long lines close the connection without a word.
	for _, req := range []string{"garbage\r\n", "GET foo\r\n", "verbosity 1\r\n", "flush_all\r\n",
		"mn\r\ngarbage\r\n", "mg " + strings.Repeat("k", 3000) + " v\r\n"} {
		c := dial(t, addr)
		c.send(req)
		want := ""
		if strings.HasPrefix(req, "mn") {
			want = "MN\r\n"
		}
		if got := readAll(t, c.nc); got != want {
			t.Errorf("%q: got %q then EOF, want %q", req, got, want)
		}
	}
}

// readAll reads nc until EOF (at most 5s) and returns what came.
func readAll(t *testing.T, nc net.Conn) string {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := nc.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Errorf("connection still open after %q", b.String())
			}
			return b.String()
		}
	}
}

// TestV1BackendFailureWording: every backend failure is "SERVER_ERROR
// backend failure", whatever its cause (refused, validation timeout), and
// a quiet request's failure is shown. (A multiget's failed key is
// answered in its place: TestV1MultiGetInPlace.)
func TestV1BackendFailureWording(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("main", "127.0.0.1", {{MAIN}}) }),
    refused = mcp.pool({ mcp.backend("refused", "127.0.0.1", {{REFUSED}}) }),
    silent = mcp.pool({ mcp.backend({ label = "silent", host = "127.0.0.1", port = {{SILENT}}, connecttimeout = 0.2, readtimeout = 0.2 }) }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
    local pre = string.match(r:key(), "^(%a+)/")
    return (p[pre] or p.main)(r)
  end)
end`, map[string]int{"MAIN": mc[0].Port, "REFUSED": closedPort(t), "SILENT": silentPort(t)}, "")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"mg refused/x v\r\n", "SERVER_ERROR backend failure\r\n"},
		{"set refused/x 0 0 1\r\nx\r\n", "SERVER_ERROR backend failure\r\n"},
		{"ms refused/x 1 q\r\na\r\nmn\r\n", "SERVER_ERROR backend failure\r\nMN\r\n"},
		{"get silent/x\r\n", "SERVER_ERROR backend failure\r\n"},
	} {
		c.send(tc.req)
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, len(tc.want))
		n, _ := io.ReadFull(c.r, buf)
		if got := string(buf[:n]); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
}

// versionServer listens on a loopback port and answers "version\r\n" with
// "VERSION 1.6.45\r\n" (and nothing else); it records every line it reads.
func versionServer(t *testing.T) (port int, lines func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	addr := testserver.Fake(t, func(nc net.Conn) {
		go func() { <-time.After(10 * time.Second); nc.Close() }()
		r := bufio.NewReader(nc)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, l)
			mu.Unlock()
			if l == "version\r\n" {
				nc.Write([]byte("VERSION 1.6.45\r\n"))
			}
		}
	})
	return int(netip.MustParseAddrPort(addr).Port()), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestV1ConnectAtStart: every backend of a Lua pool, even one of a pool
// no handler uses, is connected and validated with "version\r\n" at
// start, before any client request; a backend that cannot be validated is
// logged.
func TestV1ConnectAtStart(t *testing.T) {
	used, usedLines := versionServer(t)
	unused, unusedLines := versionServer(t)
	_, logs := luaRoutes(t, `
function mcp_config_pools()
  return {
    used = mcp.pool({ mcp.backend("used", "127.0.0.1", {{USED}}) }),
    unused = mcp.pool({ mcp.backend("", "127.0.0.1", {{UNUSED}}) }),
    silent = mcp.pool({ mcp.backend({ label = "silent", host = "127.0.0.1", port = {{SILENT}}, connecttimeout = 0.2 }) }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return p.used(r) end)
end`, map[string]int{"USED": used, "UNUSED": unused, "SILENT": silentPort(t)}, "")
	for name, lines := range map[string]func() []string{"used": usedLines, "unused": unusedLines} {
		eventually(t, name+" backend validated", func() bool { return len(lines()) > 0 })
		if got := lines(); len(got) != 1 || got[0] != "version\r\n" {
			t.Errorf("%s backend read %q, want just version", name, got)
		}
	}
	eventually(t, "the silent backend's failure logged", func() bool {
		return logs.count("backend not validated at start") == 1 && strings.Contains(logs.String(), "backend=silent")
	})
}

// TestV1ConnectAtStartOff: preconnect: false leaves a Lua pool's backends
// to their first request.
func TestV1ConnectAtStartOff(t *testing.T) {
	port, lines := versionServer(t)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("b", "127.0.0.1", {{B}}) })
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return p(r) end)
end`, map[string]int{"B": port}, "  preconnect: false\n")
	time.Sleep(200 * time.Millisecond) // a connect at start would be done by now
	if got := lines(); len(got) != 0 {
		t.Fatalf("backend read %q before any request", got)
	}
	c := dial(t, addr)
	c.send("mg k v\r\n")
	eventually(t, "the request", func() bool { return len(lines()) == 2 })
	if got := lines(); got[0] != "version\r\n" || got[1] != "mg k v\r\n" {
		t.Errorf("backend read %q", got)
	}
}

// What memcached 1.6.22's proxy, the last to run only V1 files, did
// differently from 1.6.45's, observed on 1.6.22 with the same client
// bytes: a file that attaches no function generator gets it.

// v1Routes is a V1 file: handlers are plain functions that call pools.
// Keys under str/ are answered by the handler, tok/ have their token 4
// removed, log/ are logged with mcp.log_req,
// aw/ go through mcp.await_logerrors to both pools, waiting for one
// good response; anything else goes to main.
const v1Routes = `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("main", "127.0.0.1", {{MAIN}}) }),
    slowerr = mcp.pool({ mcp.backend("slowerr", "127.0.0.1", {{SLOWERR}}) }),
  }
end
function mcp_config_routes(p)
  local function route(r)
    local k = r:key()
    if string.find(k, "^str/") then return "VALUE " .. k .. " 0 1\r\nx\r\nEND\r\n" end
    if string.find(k, "^tok/") then r:token(4, "") end
    if string.find(k, "^aw/") then
      local res = mcp.await_logerrors(r, { p.main, p.slowerr }, 1, mcp.AWAIT_OK, "awdetail")
      return res[1]
    end
    local res = p.main(r)
    if string.find(k, "^log/") then mcp.log_req(r, res, "det1") end
    return res
  end
  mcp.attach(mcp.CMD_GET, route)
  mcp.attach(mcp.CMD_MG, route)
  mcp.attach(mcp.CMD_MS, route)
end`

// slowErrServer answers "version" and every other line, after delay,
// with "SERVER_ERROR out of memory".
func slowErrServer(t *testing.T, delay time.Duration) int {
	t.Helper()
	m := testserver.NewMock(t, func(string) string {
		time.Sleep(delay)
		return "SERVER_ERROR out of memory\r\n"
	})
	return int(netip.MustParseAddrPort(m.Addr).Port())
}

// v1Pool starts a Lua pool of v1Routes on a memcached behind a tap.
func v1Pool(t *testing.T) (string, *tap) {
	t.Helper()
	mc := memcached(t, 1)
	tp := newTap(t, mc[0].Addr)
	addr, _ := luaRoutes(t, v1Routes, map[string]int{"MAIN": tp.port, "SLOWERR": slowErrServer(t, 200*time.Millisecond)}, "")
	return addr, tp
}

// TestV1MalformedMultiGet: a multi-key get whose first key starts past
// the line's 20th byte is answered "CLIENT_ERROR malformed request" once
// per key, then END, by a V1 file's pool (1.6.22); once by a V2 file's
// (TestV1MultiGetInPlace). A handler's string answers its key as it is,
// its END too (a V2 file's loses it).
func TestV1MalformedMultiGet(t *testing.T) {
	addr, tp := v1Pool(t)
	c := dial(t, addr)
	const bad = "CLIENT_ERROR malformed request\r\n"
	for _, tc := range []struct{ req, want string }{
		{"get" + strings.Repeat(" ", 200) + "str/a str/b\r\n", bad + bad + "END\r\n"},
		{"get" + strings.Repeat(" ", 18) + "str/a str/b str/c  \r\n", bad + bad + bad + "END\r\n"},
		{"get" + strings.Repeat(" ", 17) + "str/a str/b\r\n", "VALUE str/a 0 1\r\nx\r\nEND\r\nVALUE str/b 0 1\r\nx\r\nEND\r\nEND\r\n"},
		{"get" + strings.Repeat(" ", 200) + "str/a\r\n", "VALUE str/a 0 1\r\nx\r\nEND\r\n"},
	} {
		c.send(tc.req)
		c.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, len(tc.want))
		n, _ := io.ReadFull(c.r, buf)
		if got := string(buf[:n]); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req[:min(len(tc.req), 30)], got, tc.want)
		}
	}
	if got := c.do("version\r\n"); !strings.HasPrefix(got, "VERSION ") {
		t.Errorf("after: %q", got)
	}
	if got := tp.sent(); got != "" {
		t.Errorf("the backend received %q", got)
	}
}

// TestV1TokenRemoval: r:token(n, "") of a V1 file's request removes the
// token; removing the last one leaves the space before it on the wire,
// as memcached 1.6.22 sent it.
func TestV1TokenRemoval(t *testing.T) {
	addr, tp := v1Pool(t)
	c := dial(t, addr)
	if got := c.do("ms tok/a 2 T0\r\nhi\r\n"); got != "HD\r\n" {
		t.Errorf("ms tok/a: %q", got)
	}
	tp.waitSent(t, "last token removed", "ms tok/a 2 \r\nhi\r\n")
	tp.reset()
	if got := c.do("ms tok/b 2 T0 F5\r\nhi\r\n"); got != "HD\r\n" {
		t.Errorf("ms tok/b: %q", got)
	}
	tp.waitSent(t, "middle token removed", "ms tok/b 2 F5\r\nhi\r\n")
}

// TestV1LogReqLine: mcp.log_req in a V1 file writes memcached 1.6.22's
// proxyreqs line, without res= and cfd=.
func TestV1LogReqLine(t *testing.T) {
	addr, _ := v1Pool(t)
	w := watch(t, addr, "proxyreqs")
	c := dial(t, addr)
	if got := c.do("get log/a\r\n"); got != "END\r\n" {
		t.Fatalf("get: %q", got)
	}
	line := w.watchLine()
	re := regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ type=proxy_req elapsed=\d+ type=105 code=17 status=0 be=127\.0\.0\.1:\d+ detail=det1 req=get log/a\n$`)
	if !re.MatchString(line) {
		t.Errorf("line %q", line)
	}
}

// TestV1AwaitLogErrors: mcp.await_logerrors logs (and writes to proxyreqs
// watchers) the error responses that come after the handler resumed, as
// memcached 1.6.22 did; the ones the handler got are its own to log.
func TestV1AwaitLogErrors(t *testing.T) {
	addr, _ := v1Pool(t)
	w := watch(t, addr, "proxyreqs")
	c := dial(t, addr)
	if got := c.do("mg aw/a v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg: %q", got)
	}
	line := w.watchLine()
	re := regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ type=proxy_req elapsed=\d+ type=\d+ code=\d+ status=-1 be=127\.0\.0\.1:\d+ detail=awdetail req=mg aw/a v\n$`)
	if !re.MatchString(line) {
		t.Errorf("line %q", line)
	}
}
