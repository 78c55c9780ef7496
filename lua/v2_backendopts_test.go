package lua_test

import (
	"strings"
	"testing"
	"time"
)

// backendLogRoutes has a backend with the log option and defaults (every
// reply logged, with its tag), and one that refuses connections and logs
// errors only; the generator waits for both handles of log/ keys, and
// answers before the reply of slow/ keys comes.
const backendLogRoutes = `
function mcp_config_pools()
    return {
        all = mcp.pool({ mcp.backend({ label = "all", host = "127.0.0.1", port = {{mc}}, log = { tag = "alltag" } }) }),
        errs = mcp.pool({ mcp.backend({ label = "errs", host = "127.0.0.1", port = {{refused}},
            log = { errors = true, rate = 0, deadline = 0, tag = "errtag" } }) }),
    }
end

function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local all, errs = fg:new_handle(p.all), fg:new_handle(p.errs)
    fg:ready({ n = "belog", f = function(rctx)
        return function(r)
            if string.find(r:key(), "^errs/") then return rctx:enqueue_and_wait(r, errs) end
            return rctx:enqueue_and_wait(r, all)
        end
    end })
    mcp.attach(mcp.CMD_MG, fg)
end
`

// mcp.backend's log option logs the replies a request context gets from
// that backend as mcp.log_req does (watch proxyreqs), with the tag as
// detail and the client's number: every reply by default, only errors
// with errors = true and no rate or deadline. A handler that only returns
// enqueue_and_wait logs too (it is not served around Lua).
func TestV2BackendLog(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, backendLogRoutes, map[string]int{"mc": mc[0].Port, "refused": closedPort(t)}, "  preconnect: false\n")
	w := watch(t, addr, "proxyreqs")
	c := dial(t, addr)

	if got := c.do("mg all/a v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg all/a: %q", got)
	}
	l := w.watchLine()
	for _, want := range []string{"type=proxy_req ", " detail=alltag ", " req=mg all/a v", " code=", " res=ok "} {
		if !strings.Contains(l, want) {
			t.Errorf("log line %q lacks %q", l, want)
		}
	}
	if strings.Contains(l, " cfd=0 ") {
		t.Errorf("log line %q: cfd 0, want the client's number", l)
	}

	if got := c.do("mg errs/a v\r\n"); got != "SERVER_ERROR backend failure\r\n" {
		t.Fatalf("mg errs/a: %q", got)
	}
	if l := w.watchLine(); !strings.Contains(l, " detail=errtag ") || !strings.Contains(l, " req=mg errs/a v") {
		t.Errorf("error log line %q", l)
	}
	// A good reply from the errors-only backend is not logged: the next
	// line is the next request to "all".
	if got := c.do("mg all/b v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg all/b: %q", got)
	}
	if l := w.watchLine(); !strings.Contains(l, " req=mg all/b v") {
		t.Errorf("next log line %q, want all/b's", l)
	}
}

// A callback of a reply that comes after the handler returned (the
// handler waits for the first handle only) still sees the client's
// number in rctx:cfd(), as memcached's does until the context is free.
func TestV2CfdAfterReturn(t *testing.T) {
	mc := memcached(t, 2)
	src := `
function mcp_config_pools()
    return { a = mcp.pool({ mcp.backend("a", "127.0.0.1", {{a}}) }), b = mcp.pool({ mcp.backend("b", "127.0.0.1", {{b}}) }) }
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local a, b = fg:new_handle(p.a), fg:new_handle(p.b)
    fg:ready({ n = "late", f = function(rctx)
        rctx:handle_set_cb(b, function(res, req)
            mcp.log("late cfd " .. tostring(rctx:cfd()))
            return mcp.WAIT_ANY
        end)
        return function(r)
            rctx:enqueue(r, { a, b })
            return rctx:wait_handle(a)
        end
    end })
    mcp.attach(mcp.CMD_MG, fg)
end
`
	slow := delayRelay(t, mc[1].Addr, 200*time.Millisecond)
	addr, _ := luaRoutes(t, src, map[string]int{"a": mc[0].Port, "b": slow}, "")
	w := watch(t, addr, "proxyuser")
	c := dial(t, addr)
	if got := c.do("mg k v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg k: %q", got)
	}
	l := w.watchLine()
	if !strings.Contains(l, "late cfd ") || strings.Contains(l, "late cfd nil") || strings.Contains(l, "late cfd 0\n") {
		t.Errorf("callback after the handler returned logged %q, want the client's number", l)
	}
}

// backend_depth_limit (and a backend's depthlimit) fail a request at once,
// "SERVER_ERROR backend failure", when more than the limit are already
// queued or in flight to its backend, as memcached does; "stats" counts
// them in proxy_request_failed_depth.
func TestV2DepthLimit(t *testing.T) {
	src := `
function mcp_config_pools()
    mcp.backend_depth_limit(2)
    mcp.backend_connect_timeout(3)
    mcp.backend_read_timeout(3)
    return {
        g = mcp.pool({ mcp.backend("g", "127.0.0.1", {{silent}}) }),
        o = mcp.pool({ mcp.backend({ label = "o", host = "127.0.0.1", port = {{silent2}}, depthlimit = 0 }) }),
    }
end
function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local g, o = fg:new_handle(p.g), fg:new_handle(p.o)
    fg:ready({ n = "depth", f = function(rctx)
        return function(r)
            if string.find(r:key(), "^o/") then return rctx:enqueue_and_wait(r, o) end
            return rctx:enqueue_and_wait(r, g)
        end
    end })
    mcp.attach(mcp.CMD_MG, fg)
end
`
	addr, _ := luaRoutes(t, src, map[string]int{"silent": silentPort(t), "silent2": silentPort(t)}, "  preconnect: false\n")
	holder, c, admin := dial(t, addr), dial(t, addr), dial(t, addr)
	holder.send(strings.Repeat("mg k v\r\n", 3) + strings.Repeat("mg o/k v\r\n", 5))
	eventually(t, "the held requests to reach the backend", func() bool {
		return statInt(t, statLines(t, admin, "stats\r\n"), "proxy_req_active") == 8
	})
	reply, took := c.timed("mg k v\r\n")
	if reply != "SERVER_ERROR backend failure\r\n" || took > time.Second {
		t.Fatalf("fourth request over a depth limit of 2: %q after %v, want a fast backend failure", reply, took)
	}
	if n := statInt(t, statLines(t, admin, "stats\r\n"), "proxy_request_failed_depth"); n != 1 {
		t.Errorf("proxy_request_failed_depth %d, want 1", n)
	}
	// depthlimit = 0 on the backend: no limit, the request waits.
	c.send("mg o/k v\r\n")
	c.nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := c.r.ReadByte(); err == nil {
		t.Errorf("a request to a backend without limit was answered at once (%q)", b)
	}
}

// pinnedRoutes has a child generator that is both a handle of a parent
// and routed to directly.
const pinnedRoutes = `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) })
end
function mcp_config_routes(p)
    local child = mcp.funcgen_new()
    local h = child:new_handle(p)
    child:ready({ n = "child", f = function(rctx)
        return function(r) return rctx:enqueue_and_wait(r, h) end
    end })
    local parent = mcp.funcgen_new()
    local ch = parent:new_handle(child)
    parent:ready({ n = "parent", f = function(rctx)
        return function(r) return rctx:enqueue_and_wait(r, ch) end
    end })
    mcp.attach(mcp.CMD_MG, mcp.router_new({ map = { c = child, p = parent } }))
end
`

// Each request context of a generator with a sub-generator handle holds a
// context of the child for its life, as memcached pins one: the child's
// slots count grows with its parents', and a request routed to the child
// itself needs a context of its own.
func TestV2SubGeneratorPinned(t *testing.T) {
	mc := memcached(t, 1)
	addr, _ := luaRoutes(t, pinnedRoutes, map[string]int{"mc": mc[0].Port}, "")
	c, admin := dial(t, addr), dial(t, addr)
	st := statLines(t, admin, "stats proxyfuncs\r\n")
	workers := statInt(t, st, "funcs_child")
	if n := statInt(t, st, "slots_child"); n != workers {
		t.Fatalf("slots_child %d after ready, want %d (the one ready made, pinned by the parent's)", n, workers)
	}
	for range 3 {
		if got := c.do("mg p/k v\r\n"); got != "EN\r\n" {
			t.Fatalf("mg p/k: %q", got)
		}
	}
	if n := statInt(t, statLines(t, admin, "stats proxyfuncs\r\n"), "slots_child"); n != workers {
		t.Errorf("slots_child %d after requests through the parent, want %d: they run in the pinned context", n, workers)
	}
	if got := c.do("mg c/k v\r\n"); got != "EN\r\n" {
		t.Fatalf("mg c/k: %q", got)
	}
	if n := statInt(t, statLines(t, admin, "stats proxyfuncs\r\n"), "slots_child"); n != workers+1 {
		t.Errorf("slots_child %d after a request to the child, want %d", n, workers+1)
	}
}
