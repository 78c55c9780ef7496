package lua_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The watch tests check memcached's "watch proxyreqs|proxyevents|proxyuser"
// on a Lua pool: the answer, the lines' format (observed on memcached
// 1.6.45's proxy) and that a watcher never holds the proxy up.

// watchRoutes logs every request under log/ with mcp.log and mcp.log_req
// (client number 7), raises for err/, sends refused/ to a backend that
// refuses connections and big/ logs a 10 KB line.
const watchRoutes = `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("main", "127.0.0.1", {{MAIN}}) }),
    refused = mcp.pool({ mcp.backend("refused", "127.0.0.1", {{REFUSED}}) }),
  }
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local main, refused = fg:new_handle(p.main), fg:new_handle(p.refused)
  fg:ready({ n = "watch", f = function(rctx)
    return function(r)
      local k = r:key()
      if string.find(k, "^err/") then error("boom " .. k) end
      if string.find(k, "^refused/") then return rctx:enqueue_and_wait(r, refused) end
      if string.find(k, "^big/") then mcp.log(string.rep("x", 10000)) return "HD\r\n" end
      local res = rctx:enqueue_and_wait(r, main)
      if string.find(k, "^log/") then
        mcp.log("user says " .. k)
        mcp.log_req(r, res, "det1", 7)
      end
      return res
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`

// watchPool starts a Lua pool of watchRoutes on one memcached; its
// backends are dialled at first use. Its handlers may run a second (they
// build 10 KB log lines, slow under -race on a busy machine): the watch
// is under test, not the time bound.
func watchPool(t *testing.T) (addr string, main int, logs *logBuffer) {
	t.Helper()
	mc := memcached(t, 1)
	addr, logs = luaRoutes(t, watchRoutes, map[string]int{"MAIN": mc[0].Port, "REFUSED": closedPort(t)},
		"  preconnect: false\n  lua_timeout: 1000\n")
	return addr, mc[0].Port, logs
}

// watch opens a watcher connection and checks the answer.
func watch(t *testing.T, addr, streams string) *client {
	t.Helper()
	c := dial(t, addr)
	if got := c.do("watch " + streams + "\r\n"); got != "OK\r\n" {
		t.Fatalf("watch %s: %q", streams, got)
	}
	return c
}

// watchLine reads one watch line, which ends in "\n" alone.
func (c *client) watchLine() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	l, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("read: %v (got %q)", err, l)
	}
	return l
}

// TestWatchStreams: each stream's lines, in memcached's format, go to the
// watchers that asked for them, several at once; the proxy log still
// gets them.
func TestWatchStreams(t *testing.T) {
	addr, main, logs := watchPool(t)
	all := watch(t, addr, "proxyevents proxyuser proxyreqs")
	user := watch(t, addr, "proxyuser")
	c := dial(t, addr)
	if got := c.do("mg log/a v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg: %q", got)
	}
	ts := `ts=\d+\.\d{1,6} gid=\d+ `
	for _, tc := range []struct {
		who  *client
		want string
	}{
		{all, ts + `type=proxy_user msg=user says log/a\n`},
		{all, ts + fmt.Sprintf(`type=proxy_req elapsed=\d+ type=101 code=17 status=0 res=ok cfd=7 be=127\.0\.0\.1:%d detail=det1 req=mg log/a v\n`, main)},
		{user, ts + `type=proxy_user msg=user says log/a\n`},
	} {
		if got := tc.who.watchLine(); !regexp.MustCompile("^" + tc.want + "$").MatchString(got) {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	c.do("set log/b 0 0 1 noreply\r\n1\r\nget log/b\r\n")
	for _, want := range []string{
		`type=proxy_user msg=user says log/b\n`,
		fmt.Sprintf(`type=proxy_req elapsed=\d+ type=104 code=8 status=0 res=good cfd=7 be=127\.0\.0\.1:%d detail=det1 req=set log/b 0 0 1 noreplY\n`, main),
		`type=proxy_user msg=user says log/b\n`,
		fmt.Sprintf(`type=proxy_req elapsed=\d+ type=100 code=15 status=0 res=good cfd=7 be=127\.0\.0\.1:%d detail=det1 req=get log/b\n`, main),
	} {
		if got := all.watchLine(); !regexp.MustCompile("^" + ts + want + "$").MatchString(got) {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if got := c.do("mg err/x v\r\n"); got != "SERVER_ERROR lua failure\r\n" {
		t.Errorf("mg err/x: %q", got)
	}
	if got := all.watchLine(); !regexp.MustCompile("^" + ts + `type=proxy_error msg=.*routes\.lua:\d+: boom err/x\n$`).MatchString(got) {
		t.Errorf("route error: %q", got)
	}
	if got := c.do("mg refused/x v\r\n"); got != "SERVER_ERROR backend failure\r\n" {
		t.Errorf("mg refused/x: %q", got)
	}
	want := ts + `type=proxy_backend error=connecting name=127\.0\.0\.1 port=\d+ label=refused depth=0 rbuf=\n`
	if got := all.watchLine(); !regexp.MustCompile("^" + want + "$").MatchString(got) {
		t.Errorf("backend failure: %q, want %q", got, want)
	}
	// The proxyuser watcher saw none of the others'.
	c.do("mg log/c v\r\n")
	for range 2 { // set and get
		if got := user.watchLine(); !strings.Contains(got, "msg=user says log/b") {
			t.Errorf("proxyuser watcher: %q", got)
		}
	}
	if got := user.watchLine(); !strings.Contains(got, "msg=user says log/c") {
		t.Errorf("proxyuser watcher: %q", got)
	}
	if logs.count("user says log/a") != 1 {
		t.Errorf("mcp.log left the proxy log:\n%s", logs)
	}
}

// TestWatchCommand: what answers watch (memcached's words): OK for every
// stream memcached knows, a prefix naming the first it fits, ERROR for an
// unknown one (the connection stays); after OK the connection reads no
// more requests.
func TestWatchCommand(t *testing.T) {
	addr, _, _ := watchPool(t)
	for _, tc := range []struct{ req, want string }{
		{"watch\r\n", "OK\r\n"},
		{"watch fetchers mutations\r\n", "OK\r\n"},
		{"watch proxy\r\n", "OK\r\n"},
		{"watch  proxyuser proxyuser\r\n", "OK\r\n"},
		{"watch foo\r\nmn\r\n", "ERROR\r\nMN\r\n"},
		{"watch proxyreqs foo\r\nmn\r\n", "ERROR\r\nMN\r\n"},
		{"watch Proxyreqs\r\nmn\r\n", "ERROR\r\nMN\r\n"},
		{"mn\r\nwatch proxyuser\r\nmn\r\n", "MN\r\nOK\r\n"},
	} {
		c := dial(t, addr)
		c.send(tc.req)
		if got := c.readN(len(tc.want)); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
		c.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if b, err := c.r.ReadByte(); err == nil {
			t.Errorf("%q: then %q", tc.req, b)
		}
	}
}

// TestWatchSlowWatcher: a watcher that does not read never holds the
// proxy up; the lines it could not take are dropped and counted
// ("skipped=N"), and it gets the later ones; a watcher that reads along
// gets them too.
func TestWatchSlowWatcher(t *testing.T) {
	addr, _, _ := watchPool(t)
	slow := watch(t, addr, "proxyuser")
	fast := watch(t, addr, "proxyuser")
	c := dial(t, addr)
	const n = 2000 // 20 MB of lines
	start := time.Now()
	fastDone := make(chan error, 1)
	go func() { // reads along, until the last line
		for {
			fast.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
			l, err := fast.r.ReadString('\n')
			if err != nil || strings.Contains(l, "msg=user says log/last") {
				fastDone <- err
				return
			}
		}
	}()
	for i := range n {
		c.send("mg big/x v\r\n")
		if got := c.line(); got != "HD" {
			t.Fatalf("request %d: %q", i, got)
		}
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("%d requests took %v with a watcher not reading", n, d)
	}
	c.do("mg log/last v\r\n")
	if err := <-fastDone; err != nil {
		t.Errorf("the watcher reading along: %v", err)
	}
	skipped := regexp.MustCompile(`^skipped=[1-9]\d*\n$`)
	sawSkip := false
	for {
		l := slow.watchLine()
		if skipped.MatchString(l) {
			sawSkip = true
		}
		if strings.Contains(l, "msg=user says log/last") {
			break
		}
	}
	if !sawSkip {
		t.Error("the slow watcher got no skipped= line")
	}
}

// TestWatchInternal: "watch deletions" gets a line for each item a delete
// or md deletes from the internal cache (memcached's format, the key
// URI-encoded, the value's length), not for a miss; mcp.log_req of an
// internal result names its backend internal:0, as memcached does.
func TestWatchInternal(t *testing.T) {
	addr, _ := luaRoutes(t, `
function mcp_config_pools() end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(mcp.internal_handler)
  fg:ready({ n = "int", f = function(rctx)
    return function(r)
      local res = rctx:enqueue_and_wait(r, h)
      if r:key() == "log" then mcp.log_req(r, res, "det") end
      return res
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`, nil, "")
	dels, reqs := watch(t, addr, "deletions"), watch(t, addr, "proxyreqs")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"set v/foo 0 0 4\r\nvbar\r\ndelete v/foo\r\n", "STORED\r\nDELETED\r\n"},
		{"delete v/foo\r\nmd v/foo\r\n", "NOT_FOUND\r\nNF\r\n"},
		{"set k 0 0 1\r\nx\r\nmd k q\r\nmn\r\n", "STORED\r\nMN\r\n"},
		{"mg log v\r\n", "EN\r\n"},
	} {
		c.send(tc.req)
		if got := c.readN(len(tc.want)); got != tc.want {
			t.Fatalf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	ts := `ts=\d+\.\d{1,6} gid=\d+ `
	for _, want := range []string{
		`type=deleted key=v%2Ffoo cmd=delete clsid=1 size=4\n`,
		`type=deleted key=k cmd=md clsid=1 size=1\n`,
	} {
		if got := dels.watchLine(); !regexp.MustCompile("^" + ts + want + "$").MatchString(got) {
			t.Errorf("deletions: got %q, want %q", got, want)
		}
	}
	want := `type=proxy_req elapsed=\d+ type=101 code=17 status=0 res=ok cfd=0 be=internal:0 detail=det req=mg log v\n`
	if got := reqs.watchLine(); !regexp.MustCompile("^" + ts + want + "$").MatchString(got) {
		t.Errorf("proxyreqs: got %q, want %q", got, want)
	}
}
