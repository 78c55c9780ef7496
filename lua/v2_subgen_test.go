package lua_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// subgenRoutes is a parent generator with one handle per kind of child
// generator; the key n/KIND/... picks the child, and the parent reports
// what it got back as a SERVER_ERROR line, or (n/ret/KIND) returns it.
const subgenRoutes = `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) })
end

local function child(kind, p)
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(p)
    fg:ready({ n = "child_" .. kind, f = function(rctx)
        return function(r)
            if kind == "err" then error("child boom") end
            if kind == "nil" then return nil end
            if kind == "num" then return 42 end
            if kind == "str" then return "CHILDSTR\r\n" end
            if kind == "tbl" then return {} end
            return rctx:enqueue_and_wait(r, h)
        end
    end })
    return fg
end

local function show(res)
    if res == nil then return "nil" end
    if type(res) == "string" then return "string(" .. res:gsub("\r\n", "\\r\\n") .. ")" end
    if type(res) ~= "userdata" then return type(res) end
    return "res ok=" .. tostring(res:ok()) .. " hit=" .. tostring(res:hit())
end

function mcp_config_routes(p)
    local kinds = { "ok", "err", "nil", "num", "str", "tbl" }
    local fg = mcp.funcgen_new()
    local hs = {}
    for _, k in ipairs(kinds) do hs[k] = fg:new_handle(child(k, p)) end
    fg:ready({ n = "parent", f = function(rctx)
        local seen = {}
        rctx:handle_set_cb(hs.ok, function(res, req, x)
            seen[#seen+1] = "cb(" .. type(res) .. "," .. type(req) .. "," .. type(x) .. "," .. show(res) .. ",key=" .. tostring(req:key()) .. ")"
        end)
        rctx:handle_set_cb(hs.str, function(res, req) seen[#seen+1] = "cbstr" end)
        rctx:handle_set_cb(hs.err, function(res, req) seen[#seen+1] = "cberr(" .. show(res) .. ")" end)
        return function(r)
            seen = {}
            local key = r:key()
            local sub = string.match(key, "^n/ret/(%w+)")
            if sub then
                return rctx:enqueue_and_wait(r, hs[sub])
            end
            local kind = string.match(key, "^n/(%w+)")
            local h = hs[kind]
            local res = rctx:enqueue_and_wait(r, h)
            local res2, flag = rctx:result(h)
            return "SERVER_ERROR " .. kind .. ": eaw=" .. show(res) .. " result=" .. show(res2) .. "/" .. tostring(flag)
                .. " good=" .. show(rctx:res_good(h)) .. " ok=" .. show(rctx:res_ok(h)) .. " any=" .. show(rctx:res_any(h))
                .. " seen=" .. table.concat(seen, ";") .. "\r\n"
        end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// A function generator as another's handle: what the parent gets for each
// kind of child result, and what a client sees when the parent returns
// it, as memcached 1.6.45's proxy answers the same file.
func TestV2SubGenerator(t *testing.T) {
	mc := memcached(t, 1)
	set(t, mc[0].Addr, "n/ok/1", "hi")
	addr, logs := luaRoutes(t, subgenRoutes, map[string]int{"mc": mc[0].Port}, "")
	c := dial(t, addr)
	errRes := "res ok=false hit=false"
	for _, tc := range []struct{ req, want string }{
		{"mg n/ok/1 v\r\n", "SERVER_ERROR ok: eaw=res ok=true hit=true result=res ok=true hit=true/8 good=res ok=true hit=true ok=res ok=true hit=true any=res ok=true hit=true seen=cb(userdata,userdata,nil,res ok=true hit=true,key=n/ok/1)\r\n"},
		{"mg n/err/1 v\r\n", "SERVER_ERROR err: eaw=" + errRes + " result=" + errRes + "/32 good=nil ok=nil any=" + errRes + " seen=cberr(" + errRes + ")\r\n"},
		{"mg n/nil/1 v\r\n", "SERVER_ERROR nil: eaw=" + errRes + " result=" + errRes + "/32 good=nil ok=nil any=" + errRes + " seen=\r\n"},
		{"mg n/num/1 v\r\n", "SERVER_ERROR num: eaw=" + errRes + " result=" + errRes + "/32 good=nil ok=nil any=" + errRes + " seen=\r\n"},
		{"mg n/str/1 v\r\n", `SERVER_ERROR str: eaw=string(CHILDSTR\r\n) result=string(CHILDSTR\r\n)/32 good=nil ok=nil any=string(CHILDSTR\r\n) seen=` + "\r\n"},
		{"mg n/tbl/1 v\r\n", "SERVER_ERROR tbl: eaw=" + errRes + " result=" + errRes + "/32 good=nil ok=nil any=" + errRes + " seen=\r\n"},
		{"mg n/ret/ok v\r\n", "EN\r\n"},
		{"mg n/ret/err v\r\n", "SERVER_ERROR backend failure\r\n"},
		{"mg n/ret/nil v\r\n", "SERVER_ERROR backend failure\r\n"},
		{"mg n/ret/str v\r\n", "CHILDSTR\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.req, got, tc.want)
		}
	}
	// the child's error is logged, with its line
	if n := logs.count("child boom"); n != 1 {
		t.Errorf("child error logged %d times, want once", n)
	}
	// a set through the ok child reaches the backend
	if got := c.do(setReq("n/ret/ok", "v1")); got != "STORED\r\n" {
		t.Errorf("set through the child: %q", got)
	}
	if v, ok := get(t, mc[0].Addr, "n/ret/ok"); !ok || v != "v1" {
		t.Errorf("backend has %q %v", v, ok)
	}
	// the proxy keeps serving
	if got := c.do("mg n/ret/ok v\r\n"); got != "VA 2\r\nv1\r\n" {
		t.Errorf("after: %q", got)
	}
	if strings.Contains(logs.String(), "panic") {
		t.Errorf("a panic was logged:\n%s", logs)
	}
}

// subgenBackground sends every request to a child generator (a slow
// backend) without waiting, and answers at once; "wait/..." keys wait.
const subgenBackground = `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("slow", "127.0.0.1", {{slow}}) })
end

function mcp_config_routes(p)
    local child = mcp.funcgen_new()
    local ch = child:new_handle(p)
    child:ready({ n = "child", f = function(rctx)
        return function(r) return rctx:enqueue_and_wait(r, ch) end
    end })
    local fg = mcp.funcgen_new()
    local h = fg:new_handle(child)
    fg:ready({ n = "parent", f = function(rctx)
        return function(r)
            rctx:enqueue(r, h)
            if string.find(r:key(), "^wait/") then
                rctx:wait_cond(1)
                return rctx:res_any(h)
            end
            rctx:wait_cond(0)
            return "HD\r\n"
        end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// A child generator outlives its parent's handler: the client has its
// answer before the child's backend call comes back, and the call still
// completes; many requests in flight each use their own contexts.
func TestV2SubGeneratorBackground(t *testing.T) {
	mc := memcached(t, 1)
	slow := delayRelay(t, mc[0].Addr, 100*time.Millisecond)
	addr, logs := luaRoutes(t, subgenBackground, map[string]int{"slow": slow}, "")
	c := dial(t, addr)
	got, took := c.timed("ms bg 2 T0\r\nhi\r\n")
	if got != "HD\r\n" || took > 80*time.Millisecond {
		t.Errorf("background: %q after %v, want HD at once", got, took)
	}
	eventually(t, "the background write", func() bool { v, ok := get(t, mc[0].Addr, "bg"); return ok && v == "hi" })
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "ms wait/%d 1 T0\r\n%d\r\n", i, i%10)
	}
	c.send(b.String())
	for i := range 40 {
		if got := c.reply(); got != "HD\r\n" {
			t.Fatalf("ms wait/%d: %q", i, got)
		}
	}
	b.Reset()
	for i := range 40 {
		fmt.Fprintf(&b, "mg wait/%d v\r\n", i)
	}
	c.send(b.String())
	for i := range 40 {
		if got := c.reply(); got != fmt.Sprintf("VA 1\r\n%d\r\n", i%10) {
			t.Fatalf("mg wait/%d: %q", i, got)
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// cbRoutes sets a callback per handle: "hit" reclassifies a hit as RES_OK
// and ends the wait, "miss" makes a miss RES_GOOD, "boom" raises, "wait"
// tries to wait.
const cbRoutes = `
function mcp_config_pools()
    return mcp.pool({ mcp.backend("b1", "127.0.0.1", {{mc}}) })
end

function mcp_config_routes(p)
    local fg = mcp.funcgen_new()
    local hs = {}
    for _, k in ipairs({ "hit", "miss", "boom", "wait" }) do hs[k] = fg:new_handle(p) end
    fg:ready({ n = "cb", f = function(rctx)
        local calls = 0
        rctx:handle_set_cb(hs.hit, function(res, req)
            calls = calls + 1
            return mcp.WAIT_OK, mcp.WAIT_RESUME
        end)
        rctx:handle_set_cb(hs.miss, function(res, req)
            calls = calls + 1
            return mcp.WAIT_GOOD
        end)
        rctx:handle_set_cb(hs.boom, function() calls = calls + 1; error("callback boom") end)
        rctx:handle_set_cb(hs.wait, function() calls = calls + 1; rctx:sleep(0.1) end)
        return function(r)
            local h = hs[string.match(r:key(), "^(%w+)")]
            rctx:enqueue(r, h)
            local n = rctx:wait_cond(1, mcp.WAIT_GOOD)
            local _, flag = rctx:result(h)
            return "HD n" .. n .. " f" .. tostring(flag) .. " c" .. calls .. "\r\n"
        end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// rctx:handle_set_cb: the callback runs once per response, before the
// wait counts it, and what it returns changes the result's flag and may
// end the wait (memcached 1.6.45: WAIT_OK plus WAIT_RESUME on a hit gives
// flag 16 and wait_cond(1, WAIT_GOOD) returns 0).
func TestV2HandleCallback(t *testing.T) {
	mc := memcached(t, 1)
	for _, k := range []string{"hit", "boom/x", "wait/x"} {
		set(t, mc[0].Addr, k, "v")
	}
	addr, logs := luaRoutes(t, cbRoutes, map[string]int{"mc": mc[0].Port}, "")
	c := dial(t, addr)
	for _, tc := range []struct{ req, want string }{
		{"mg hit v\r\n", "HD n0 f16 c1\r\n"},
		{"mg miss/x v\r\n", "HD n1 f8 c2\r\n"},
		{"mg boom/x v\r\n", "HD n1 f8 c3\r\n"}, // the error is ignored: a hit stays good
		{"mg wait/x v\r\n", "HD n1 f8 c4\r\n"},
	} {
		if got := c.do(tc.req); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.req, got, tc.want)
		}
	}
	for _, msg := range []string{"callback boom", "sleep can only be called from a route handler"} {
		if logs.count(msg) != 1 {
			t.Errorf("log has %q %d times, want once:\n%s", msg, logs.count(msg), logs)
		}
	}
}
