package lua_test

import (
	"net/netip"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"shardproxy/internal/testserver"
)

// A Lua memcache pool's backends follow memcached's proxy (observed on
// 1.6.45): a socket failure is dialled again at once and logged to watch
// proxyevents with the calls it held and the bytes it had not framed;
// the failure past backend_failure_limit marks the backend bad (a
// markedbad line, "stats proxybe"); ERROR and CLIENT_ERROR are passed on
// and then drop the socket; a get the route sends goes alone.

// mockBackend is a testserver.Mock that answers every line with the
// reply set for it (none when unset).
type mockBackend struct {
	*testserver.Mock
	mu      sync.Mutex
	replies map[string]string
}

func newMockBackend(t *testing.T) (*mockBackend, int) {
	m := &mockBackend{replies: map[string]string{}}
	m.Mock = testserver.NewMock(t, func(l string) string {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.replies[l]
	})
	return m, int(netip.MustParseAddrPort(m.Addr).Port())
}

func (m *mockBackend) reply(line, reply string) {
	m.mu.Lock()
	m.replies[line] = reply
	m.mu.Unlock()
}

func TestBackendEventsAndReconnect(t *testing.T) {
	m, port := newMockBackend(t)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  mcp.backend_read_timeout(0.3)
  mcp.backend_failure_limit(1)
  mcp.backend_retry_waittime(0.6) -- whole seconds: 1
  return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{B1}}) })
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ n = "b", f = function(rctx)
    return function(r) return rctx:enqueue_and_wait(r, h) end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`, map[string]int{"B1": port}, "")
	eventually(t, "validated at start", func() bool { return m.Accepted.Load() == 1 && len(m.Take()) == 1 })
	w := watch(t, addr, "proxyevents")
	c := dial(t, addr)
	head := `^ts=\d+\.\d{1,6} gid=\d+ type=proxy_backend `
	be := ` name=127\.0\.0\.1 port=` + strconv.Itoa(port) + ` label=b1 `
	wantLine := func(want string) {
		t.Helper()
		if got := w.watchLine(); !regexp.MustCompile(head + want + "\n$").MatchString(got) {
			t.Fatalf("proxyevents: %q, want %q", got, want)
		}
	}
	redialled := func(n int64) {
		t.Helper()
		eventually(t, "the redial", func() bool { return m.Accepted.Load() == n })
	}

	// A reply cut short: the read timeout, what followed its last line.
	m.reply("get cut\r\n", "VALUE cut 0 2\r\nhi\r\nEN")
	if got := c.do("get cut\r\n"); got != "SERVER_ERROR backend failure\r\n" {
		t.Fatalf("cut reply: %q", got)
	}
	wantLine(`error=timeout` + be + `depth=1 rbuf=EN`)
	redialled(2)

	// Bytes after the reply: passed on, then trailingdata, escaped.
	m.reply("get trail\r\n", "VALUE trail 0 2\r\nok\r\nEND\r\ngar bage")
	if got := c.do("get trail\r\n"); got != "VALUE trail 0 2\r\nok\r\nEND\r\n" {
		t.Fatalf("trailing data: %q", got)
	}
	wantLine(`error=trailingdata` + be + `depth=0 rbuf=gar%20bage`)
	redialled(3)

	// CLIENT_ERROR is passed on, and the socket dropped.
	m.reply("get ce\r\n", "CLIENT_ERROR bad command line format\r\n")
	if got := c.do("get ce\r\n"); got != "CLIENT_ERROR bad command line format\r\n" {
		t.Fatalf("CLIENT_ERROR: %q", got)
	}
	wantLine(`error=invalidprotocol` + be + `depth=0 rbuf=`)
	redialled(4)

	// A multiget's gets go one by one; nothing is bad. The redial's
	// validation is read first: the socket is accepted before its
	// "version" arrives.
	eventually(t, "the redial validated", func() bool {
		l := m.Lines()
		return len(l) > 0 && l[len(l)-1] == "version\r\n"
	})
	m.Take()
	m.reply("get a\r\n", "END\r\n")
	m.reply("get b\r\n", "END\r\n")
	if got := c.do("get a b\r\n"); got != "END\r\n" {
		t.Fatalf("multiget: %q", got)
	}
	if got := m.Take(); len(got) != 2 || got[0] != "get a\r\n" || got[1] != "get b\r\n" {
		t.Fatalf("backend read %q, want the gets one by one", got)
	}
	if got := statsText(c, "stats proxybe\r\n"); got != "END\r\n" {
		t.Fatalf("stats proxybe: %q", got)
	}

	// A silent server: the idle socket closed (1), its redial's
	// validation not answered (2): past the limit, marked bad.
	m.Validate.Store(false)
	m.CloseCur()
	wantLine(`error=disconnected` + be + `depth=0 rbuf=`)
	wantLine(`error=readvalidate` + be + `depth=0 rbuf=`)
	wantLine(`error=markedbad` + be + `retry=1`)
	if got := statsText(c, "stats proxybe\r\n"); got != "STAT bad_b1 1\r\nEND\r\n" {
		t.Fatalf("stats proxybe while bad: %q", got)
	}
	if got := c.do("get a\r\n"); got != "SERVER_ERROR backend failure\r\n" {
		t.Fatalf("get while bad: %q", got)
	}
	// The retry dials on its own; once validated the backend is good.
	m.Validate.Store(true)
	eventually(t, "restored", func() bool { return statsText(c, "stats proxybe\r\n") == "END\r\n" })
	if got := c.do("get a\r\n"); got != "END\r\n" {
		t.Fatalf("get after the retry: %q", got)
	}
}
