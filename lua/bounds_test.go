package lua_test

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// boundsRoutes has a V1 handler (mg, ms) and a V2 function generator's
// handler (get, set) that misbehave as the key asks: raise, loop, allocate
// without end, grow a string by doubling, return what is not a response.
// Any other key goes to the pool. Each bad line ends with a "-- @NAME"
// marker the test finds the line by.
const boundsRoutes = `
function mcp_config_pools()
  if mcp.start_arg == "cron" then
    mcp.register_cron("spin", { every = 1, rerun = false, func = function()
      while true do end -- @cronloop
    end })
  end
  return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{MC}}) })
end

local function v1(p)
  return function(r)
    local k = r:key()
    if k == "bad/raise" then error("v1 raised") end -- @v1raise
    if k == "bad/loop" then while true do end end -- @v1loop
    if k == "bad/alloc" then local t, mb = {}, string.rep("x", 1e6) while true do t[#t + 1] = mb .. #t end end -- @v1alloc
    if k == "bad/cat" then local s = "x" while true do s = s .. s end end -- @v1cat
    if k == "bad/nil" then return nil end
    if k == "bad/number" then return 42 end
    if k == "bad/table" then return { "HD\r\n" } end
    if k == "bad/boolean" then return true end
    return p(r)
  end
end

function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, v1(p))
  mcp.attach(mcp.CMD_MS, v1(p))
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ n = "v2", f = function(rctx)
    return function(r)
      local k = r:key()
      if k == "bad/raise" then error("v2 raised") end -- @v2raise
      if k == "bad/loop" then while true do end end -- @v2loop
      if k == "bad/waitloop" then rctx:enqueue_and_wait(r, h) while true do end end -- @v2waitloop
      if k == "bad/alloc" then local t, mb = {}, string.rep("y", 1e6) while true do t[#t + 1] = mb .. #t end end -- @v2alloc
      if k == "bad/nil" then return nil end
      if k == "bad/number" then return 42 end
      if k == "bad/table" then return {} end
      if k == "bad/boolean" then return false end
      return rctx:enqueue_and_wait(r, h)
    end
  end })
  -- a generator that loops when a second request context is made
  local spin = mcp.funcgen_new()
  spin:new_handle(p)
  local calls = 0
  spin:ready({ n = "spin", f = function(rctx)
    calls = calls + 1
    if calls > 1 then while true do end end -- @genloop
    return function(r) rctx:sleep(0.5) return "HD first\r\n" end
  end })
  mcp.attach(mcp.CMD_GET, fg)
  mcp.attach(mcp.CMD_SET, fg)
  mcp.attach(mcp.CMD_MD, spin)
end
`

// lineOf returns the line of src holding "-- @"+marker.
func lineOf(t *testing.T, src, marker string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if strings.HasSuffix(l, "-- @"+marker) {
			return i + 1
		}
	}
	t.Fatalf("no marker %s", marker)
	return 0
}

// TestBadRoutes runs route code that raises, loops, allocates without end
// and returns what is not a response, through V1 and V2 handlers, a
// function generator and a cron, behind a real socket: each bad request
// gets its SERVER_ERROR and a log line naming the file and line, the next
// request on the same connection (the same Lua state) is served, and a
// client doing verified sets and gets meanwhile sees no error.
func TestBadRoutes(t *testing.T) {
	mc := memcached(t, 1)[0]
	// The memory budget is the process's allocations during a run, the
	// other clients' too: pool lp, where runs loop, has a short time
	// budget and a memory budget its neighbours cannot fill meanwhile; pool
	// mp, where runs allocate, a time budget they cannot reach first.
	file := writeRoutes(t, strings.ReplaceAll(boundsRoutes, "{{MC}}", fmt.Sprint(mc.Port)))
	srv, logs, err := newProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n  lua_timeout: 200\n  lua_max_alloc: 64\n  lua_arg: cron\n"+
		"mp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n  lua_timeout: 10000\n  lua_max_alloc: 16\n")
	if err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{"lp": srv.Addr("lp").String(), "mp": srv.Addr("mp").String()}
	conns := map[string]*client{"lp": dial(t, addrs["lp"]), "mp": dial(t, addrs["mp"])}
	c := conns["lp"]
	traffic := startTraffic(t, []string{addrs["lp"], addrs["mp"]}, 2)

	for _, tc := range []struct {
		pool      string
		req, want string
		log       string // the event logged, "" for none
		marker    string // the line the log names, "" for none
	}{
		{"lp", "mg bad/raise v\r\n", "SERVER_ERROR lua failure\r\n", "v1 raised", "v1raise"},
		{"lp", "mg bad/loop v\r\n", "SERVER_ERROR lua timeout\r\n", "ran longer than 200ms", "v1loop"},
		{"mp", "mg bad/alloc v\r\n", "SERVER_ERROR lua memory limit\r\n", "allocated more than 16 MiB", "v1alloc"},
		{"mp", "mg bad/cat v\r\n", "SERVER_ERROR lua memory limit\r\n", "allocated more than 16 MiB", "v1cat"},
		{"lp", "mg bad/nil v\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "mg bad/number v\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "mg bad/table v\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "mg bad/boolean v\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "ms bad/loop 1\r\nx\r\n", "SERVER_ERROR lua timeout\r\n", "ran longer than 200ms", "v1loop"},
		{"lp", "get bad/raise\r\n", "SERVER_ERROR lua failure\r\n", "v2 raised", "v2raise"},
		{"lp", "get bad/loop\r\n", "SERVER_ERROR lua timeout\r\n", "ran longer than 200ms", "v2loop"},
		{"lp", "get bad/waitloop\r\n", "SERVER_ERROR lua timeout\r\n", "ran longer than 200ms", "v2waitloop"},
		{"mp", "get bad/alloc\r\n", "SERVER_ERROR lua memory limit\r\n", "allocated more than 16 MiB", "v2alloc"},
		{"lp", "get bad/nil\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "get bad/number\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "get bad/table\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"lp", "get bad/boolean\r\n", "SERVER_ERROR bad response\r\n", "", ""},
		{"mp", "set bad/alloc 0 0 1\r\nx\r\n", "SERVER_ERROR lua memory limit\r\n", "allocated more than 16 MiB", "v2alloc"},
		// A multi-get with a bad key answers the other keys and puts the
		// error in the bad key's place, before END, as memcached's proxy
		// does (the good keys are misses).
		{"lp", "get good/a bad/nil good/b\r\n", "SERVER_ERROR bad response\r\nEND\r\n", "", ""},
		{"lp", "get after/get bad/loop\r\n", "SERVER_ERROR lua timeout\r\nEND\r\n", "ran longer than 200ms", "v2loop"},
	} {
		t.Run(strings.Fields(tc.req)[0]+" "+strings.Fields(tc.req)[1], func(t *testing.T) {
			c := conns[tc.pool]
			got, took := c.timed(tc.req)
			if strings.HasPrefix(tc.req, "get ") && len(strings.Fields(tc.req)) > 2 {
				got += c.line() + "\r\n" // a multi-get's END, after the error in place
			}
			if took > 5*time.Second {
				t.Errorf("%q answered after %v", tc.req, took)
			}
			if tc.marker == "v1cat" && got == "SERVER_ERROR lua timeout\r\n" {
				// A doubling string grows in uninterruptible steps: on a
				// loaded machine the time bound may come first. Either
				// bound stops it; the process lives on (checked below).
				tc.log = "ran longer than 200ms"
			} else if got != tc.want {
				t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
			}
			if tc.log != "" {
				where := fmt.Sprintf("%s:%d:", file, lineOf(t, boundsRoutes, tc.marker))
				eventually(t, "the log line", func() bool {
					for _, l := range strings.Split(logs.String(), "\n") {
						if strings.Contains(l, tc.log) && strings.Contains(l, where) {
							return true
						}
					}
					return false
				})
			}
			// The same connection, so the same Lua state, serves on.
			key := "after/" + strings.Fields(tc.req)[1]
			if got := c.do("set " + key + " 0 0 2\r\nok\r\n"); got != "STORED\r\n" {
				t.Errorf("set after %q: %q", tc.req, got)
			}
			if got := c.do("get " + key + "\r\n"); got != "VALUE "+key+" 0 2\r\nok\r\nEND\r\n" {
				t.Errorf("get after %q: %q", tc.req, got)
			}
			if got := c.do("mg " + key + " v\r\n"); got != "VA 2\r\nok\r\n" {
				t.Errorf("mg after %q: %q", tc.req, got)
			}
		})
	}

	t.Run("function generator", func(t *testing.T) {
		// The first request holds the only request context while it
		// sleeps; the second needs a new one, and the generator loops.
		c.send("md gen/a\r\nmd gen/b\r\n")
		first, second := c.reply(), c.reply()
		if first != "HD first\r\n" || second != "SERVER_ERROR lua timeout\r\n" {
			t.Errorf("got %q then %q, want HD first, then SERVER_ERROR lua timeout", first, second)
		}
		where := fmt.Sprintf("%s:%d:", file, lineOf(t, boundsRoutes, "genloop"))
		if !strings.Contains(logs.String(), "lua function generator failed") || !strings.Contains(logs.String(), "spin: ran longer than 200ms: ") ||
			!strings.Contains(logs.String(), where) {
			t.Errorf("the log lacks the generator's stop at %s:\n%s", where, logs)
		}
		if got := c.do("mg after/gen v\r\n"); got != "EN\r\n" {
			t.Errorf("mg after the generator: %q", got)
		}
	})

	t.Run("cron", func(t *testing.T) {
		where := fmt.Sprintf("%s:%d:", file, lineOf(t, boundsRoutes, "cronloop"))
		eventually(t, "the cron's log line", func() bool {
			for _, l := range strings.Split(logs.String(), "\n") {
				// Memory is the process's: a greedy handler of the other
				// pool running meanwhile may get the cron stopped for it.
				stopped := strings.Contains(l, "spin: ran longer than 200ms") || strings.Contains(l, "spin: allocated more than")
				if strings.Contains(l, "lua cron failed") && stopped && strings.Contains(l, where) {
					return true
				}
			}
			return false
		})
	})

	ops, errs := traffic.stop()
	if ops == 0 || len(errs) > 0 {
		t.Errorf("the other clients: %d requests, %d failed: %v", ops, len(errs), errs)
	}
}

// traffic is clients doing verified sets and gets on connections of their
// own until stopped.
type traffic struct {
	done chan struct{}
	wg   sync.WaitGroup
	ops  atomic.Int64
	mu   sync.Mutex
	errs []string
}

// startTraffic starts n clients against each of addrs.
func startTraffic(t *testing.T, addrs []string, n int) *traffic {
	t.Helper()
	tr := &traffic{done: make(chan struct{})}
	for i := range n * len(addrs) {
		nc, err := net.DialTimeout("tcp", addrs[i%len(addrs)], 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			defer nc.Close()
			tr.run(nc, i)
		}()
	}
	t.Cleanup(func() { tr.stop() })
	return tr
}

// run is one client: set a fresh key, get it back, until stopped or a
// reply is wrong (a connection out of step cannot go on).
func (tr *traffic) run(nc net.Conn, id int) {
	r := bufio.NewReader(nc)
	for seq := 0; ; seq++ {
		select {
		case <-tr.done:
			return
		default:
		}
		key := fmt.Sprintf("tr/%d/%d", id, seq)
		val := fmt.Sprintf("v%d-%d", id, seq)
		want := valueReply(key, val)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(nc, "%sget %s\r\n", setReq(key, val), key); err != nil {
			tr.fail(fmt.Sprintf("client %d: write: %v", id, err))
			return
		}
		stored, err := r.ReadString('\n')
		if err != nil || stored != "STORED\r\n" {
			tr.fail(fmt.Sprintf("client %d: set %s: %q %v", id, key, stored, err))
			return
		}
		var got strings.Builder
		for !strings.HasSuffix(got.String(), "END\r\n") && got.Len() < len(want) {
			l, err := r.ReadString('\n')
			got.WriteString(l)
			if err != nil || strings.HasPrefix(l, "SERVER_ERROR") {
				break
			}
		}
		if got.String() != want {
			tr.fail(fmt.Sprintf("client %d: get %s: %q", id, key, got.String()))
			return
		}
		tr.ops.Add(2)
	}
}

func (tr *traffic) fail(msg string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.errs = append(tr.errs, msg)
}

// stop stops the clients and returns how many requests they completed and
// their failures.
func (tr *traffic) stop() (int64, []string) {
	select {
	case <-tr.done:
	default:
		close(tr.done)
	}
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.ops.Load(), tr.errs
}
