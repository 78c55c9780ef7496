package lua_test

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// awaitRoutes runs mcp.await as a request asks: "mg POOLS:MODE:N:KEY v"
// awaits "mg KEY v" on the pools (comma-separated names) with the mode
// (a name, or "-" to leave it out) and wait_for N ("-" to leave it out),
// and answers "HD n=<results> codes=<code,...> hits=<hits> ok=<oks>".
// "ms POOLS:MODE:N:KEY 1" does the same for a set of KEY.
const awaitRoutes = `
function mcp_config_pools()
  mcp.backend_read_timeout(2)
  mcp.backend_failure_limit(0)
  return {
    fast = mcp.pool({ mcp.backend("fast", "127.0.0.1", {{FAST}}) }),
    slow = mcp.pool({ mcp.backend("slow", "127.0.0.1", {{SLOW}}) }),
    fail = mcp.pool({ mcp.backend("fail", "127.0.0.1", {{FAIL}}) }),
  }
end

local function split(s)
  local out = {}
  for part in string.gmatch(s, "[^:]+") do out[#out + 1] = part end
  return out
end

function mcp_config_routes(p)
  local function run(r, line, value)
    local spec = split(r:key())
    local pools = {}
    for name in string.gmatch(spec[1], "[^,]+") do pools[#pools + 1] = p[name] end
    local req = mcp.request(string.format(line, spec[4]), value)
    local res
    if spec[2] == "-" and spec[3] == "-" then
      res = mcp.await(req, pools)
    elseif spec[2] == "-" then
      res = mcp.await(req, pools, tonumber(spec[3]))
    elseif spec[2] == "LOGERRORS" then
      res = mcp.await_logerrors(req, pools, tonumber(spec[3]), mcp.AWAIT_OK, "await-detail")
    else
      res = mcp.await(req, pools, tonumber(spec[3]), mcp["AWAIT_" .. spec[2]])
    end
    local codes, hits, oks = {}, 0, 0
    for i, x in ipairs(res) do
      codes[i] = x:code()
      if x:hit() then hits = hits + 1 end
      if x:ok() then oks = oks + 1 end
    end
    return string.format("HD n=%d codes=%s hits=%d ok=%d\r\n", #res, table.concat(codes, ","), hits, oks)
  end
  mcp.attach(mcp.CMD_MG, function(r) return run(r, "mg %s v\r\n") end)
  mcp.attach(mcp.CMD_MS, function(r) return run(r, "ms %s 5\r\n", "after\r\n") end)
end
`

// TestAwaitModes runs every await mode against a fast pool, a slow one
// (replies held for delay) and a failing one (connections refused), and
// checks when each returns and which responses it returns, as memcached's
// mcplib_await_return decides.
func TestAwaitModes(t *testing.T) {
	const delay = 300 * time.Millisecond
	mc := memcached(t, 2)
	fast, slowServer := mc[0], mc[1]
	ports := map[string]int{
		"FAST": fast.Port,
		"SLOW": delayRelay(t, slowServer.Addr, delay),
		"FAIL": closedPort(t),
	}
	addr, logs := luaRoutes(t, awaitRoutes, ports, "")
	set(t, fast.Addr, "hit", "v1")
	set(t, slowServer.Addr, "hit", "v2")
	c := dial(t, addr)
	c.do("mg fast,slow,fail:ANY:-:warm v\r\n") // connect to every backend first

	const (
		quick = iota // before the slow pool answers
		slow         // after it
	)
	for _, tc := range []struct {
		name string
		spec string
		when int
		want string // alternatives separated by |, for responses that race
	}{
		// AWAIT_GOOD counts hits: a miss or an error does not end the wait.
		{"good: first hit ends it", "fail,slow,fast:GOOD:1:hit", quick, "n=2 codes=23,15 hits=1 ok=1|n=1 codes=15 hits=1 ok=1"},
		{"good: misses wait for all", "fast,slow:GOOD:2:miss", slow, "n=2 codes=17,17 hits=0 ok=2"},
		{"good: a miss does not count", "slow,fast:GOOD:1:miss", slow, "n=2 codes=17,17 hits=0 ok=2"},
		{"good by default, all by default", "fast,slow:-:-:hit", slow, "n=2 codes=15,15 hits=2 ok=2"},
		{"wait_for is capped at the pools", "fast:-:5:hit", quick, "n=1 codes=15 hits=1 ok=1"},
		// AWAIT_ANY counts any response, errors too.
		{"any: an error counts", "fail,slow:ANY:1:hit", quick, "n=1 codes=23 hits=0 ok=0"},
		{"any: all", "fail,slow:ANY:2:hit", slow, "n=2 codes=23,15 hits=1 ok=1"},
		// AWAIT_OK counts responses without an error, misses too.
		{"ok: a miss counts", "fail,slow,fast:OK:1:miss", quick, "n=2 codes=23,17 hits=0 ok=1|n=1 codes=17 hits=0 ok=1"},
		{"ok: an error does not", "fail,slow:OK:1:miss", slow, "n=2 codes=23,17 hits=0 ok=1"},
		// AWAIT_FIRST returns the first pool's response only.
		{"first: waits for the first pool", "slow,fast:FIRST:-:hit", slow, "n=1 codes=15 hits=1 ok=1"},
		{"first: fast first pool", "fast,slow:FIRST:-:hit", quick, "n=1 codes=15 hits=1 ok=1"},
		{"first: even an error", "fail,fast:FIRST:-:hit", quick, "n=1 codes=23 hits=0 ok=0"},
		// AWAIT_FASTGOOD ends on the first hit, else after wait_for misses.
		{"fastgood: a hit ends it", "slow,fast:FASTGOOD:2:hit", quick, "n=1 codes=15 hits=1 ok=1"},
		{"fastgood: misses count", "slow,fast:FASTGOOD:2:miss", slow, "n=2 codes=17,17 hits=0 ok=2"},
		{"fastgood: errors do not", "fail,fast:FASTGOOD:2:miss", quick, "n=2 codes=23,17 hits=0 ok=1"},
		// AWAIT_BACKGROUND returns at once with nothing.
		{"background", "slow,fast:BACKGROUND:-:hit", quick, "n=0 codes= hits=0 ok=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, took := c.timed("mg " + tc.spec + " v\r\n")
			got = strings.TrimSuffix(strings.TrimPrefix(got, "HD "), "\r\n")
			// Responses arrive in any order among the quick ones; compare
			// the code lists as multisets.
			match := false
			for _, want := range strings.Split(tc.want, "|") {
				match = match || normalize(got) == normalize(want)
			}
			if !match {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			switch {
			case tc.when == quick && took >= delay*2/3:
				t.Errorf("took %v, want it before the slow pool's %v", took, delay)
			case tc.when == slow && took < delay:
				t.Errorf("took %v, want it to wait for the slow pool (%v)", took, delay)
			}
		})
	}

	t.Run("background requests still run", func(t *testing.T) {
		got, took := c.timed("ms slow,fast:BACKGROUND:-:bg 1\r\nx\r\n")
		if got != "HD n=0 codes= hits=0 ok=0\r\n" || took >= delay*2/3 {
			t.Fatalf("got %q after %v", got, took)
		}
		eventually(t, "the background set on the slow pool", func() bool {
			v, ok := get(t, slowServer.Addr, "bg")
			return ok && v == "after"
		})
		if v, ok := get(t, fast.Addr, "bg"); !ok || v != "after" {
			t.Errorf("fast pool: %q %v", v, ok)
		}
	})

	t.Run("await_logerrors", func(t *testing.T) {
		// Both responses come before the handler resumes: memcached logs
		// neither (it logs the errors that come after; TestV1AwaitLogErrors).
		if got := c.do("mg fail,fast:LOGERRORS:2:hit v\r\n"); got != "HD n=2 codes=23,15 hits=1 ok=1\r\n" &&
			got != "HD n=2 codes=15,23 hits=1 ok=1\r\n" {
			t.Fatalf("got %q", got)
		}
		if n := logs.count(`msg="lua request"`); n != 0 {
			t.Errorf("%d request log lines, want none", n)
		}
	})
}

// normalize sorts the codes of "n=.. codes=a,b hits=.." so the order in
// which responses arrived does not matter.
func normalize(s string) string {
	f := strings.Fields(s)
	for i, x := range f {
		if codes, ok := strings.CutPrefix(x, "codes="); ok {
			parts := strings.Split(codes, ",")
			for a := range parts {
				for b := a + 1; b < len(parts); b++ {
					if parts[b] < parts[a] {
						parts[a], parts[b] = parts[b], parts[a]
					}
				}
			}
			f[i] = "codes=" + strings.Join(parts, ",")
		}
	}
	return fmt.Sprint(f)
}

// scriptedBackend is a backend the test answers itself: it answers
// "version", then hands the test its socket and each line it reads.
type scriptedBackend struct {
	port  int
	conn  chan net.Conn
	lines chan string
}

func newScriptedBackend(t *testing.T) *scriptedBackend {
	t.Helper()
	b := &scriptedBackend{conn: make(chan net.Conn, 4), lines: make(chan string, 64)}
	addr := testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if l == "version\r\n" {
				nc.Write([]byte("VERSION 1.6.22\r\n"))
				b.conn <- nc
				continue
			}
			b.lines <- l
		}
	})
	b.port = int(netip.MustParseAddrPort(addr).Port())
	return b
}

// next waits for the backend's next request line.
func (b *scriptedBackend) next(t *testing.T) string {
	t.Helper()
	select {
	case l := <-b.lines:
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the backend")
		return ""
	}
}

// TestAwaitArrivalOrder: replies that arrive together are counted in the
// order their backends sent them, as memcached's proxy reads them: with
// wait_for 1 (AWAIT_GOOD), a miss then a hit arriving at once from the
// first two pools give both, never the hit alone; a hit from the first
// pool gives it alone even when the others' hits follow at once.
func TestAwaitArrivalOrder(t *testing.T) {
	bes := []*scriptedBackend{newScriptedBackend(t), newScriptedBackend(t), newScriptedBackend(t)}
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return {
    mcp.pool({ mcp.backend("b0", "127.0.0.1", {{B0}}) }),
    mcp.pool({ mcp.backend("b1", "127.0.0.1", {{B1}}) }),
    mcp.pool({ mcp.backend("b2", "127.0.0.1", {{B2}}) }),
  }
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_GET, function(r)
    local res = mcp.await(r, p, 1)
    local out = {}
    for i, x in ipairs(res) do out[i] = x:hit() and "h" or "m" end
    local v = table.concat(out)
    return "VALUE " .. r:key() .. " 0 " .. #v .. "\r\n" .. v .. "\r\nEND\r\n"
  end)
end`, map[string]int{"B0": bes[0].port, "B1": bes[1].port, "B2": bes[2].port}, "")
	conns := make([]net.Conn, len(bes))
	for i, b := range bes {
		select {
		case conns[i] = <-b.conn:
		case <-time.After(5 * time.Second):
			t.Fatalf("backend %d not connected", i)
		}
	}
	c := dial(t, addr)
	hit, miss := "VALUE k 0 1\r\nx\r\nEND\r\n", "END\r\n"
	for _, tc := range []struct {
		name  string
		sends []string // what b0, b1, b2 answer at once
		want  string
	}{
		{"miss then hit", []string{miss, hit, ""}, "mh"},
		{"miss, miss, hit", []string{miss, miss, hit}, "mmh"},
		{"hit first", []string{hit, hit, hit}, "h"},
	} {
		for round := range 20 {
			c.send("get k\r\n")
			for _, b := range bes {
				if l := b.next(t); l != "get k\r\n" {
					t.Fatalf("backend got %q", l)
				}
			}
			for i, s := range tc.sends {
				if s != "" {
					conns[i].Write([]byte(s))
				}
			}
			want := fmt.Sprintf("VALUE k 0 %d\r\n%s\r\nEND\r\n", len(tc.want), tc.want)
			if got := c.reply(); got != want {
				t.Fatalf("%s, round %d: got %q, want %q", tc.name, round, got, want)
			}
			for i, s := range tc.sends {
				if s == "" {
					conns[i].Write([]byte(miss))
				}
			}
		}
	}
}
