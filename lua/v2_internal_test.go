package lua_test

import (
	"regexp"
	"strings"
	"testing"
)

// internalWatchRoutes answers every storage command from the pool's own
// cache through a V2 handle, logging each under log/ with mcp.log_req.
const internalWatchRoutes = `
function mcp_config_pools() return true end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(mcp.internal_handler)
  fg:ready({ n = "internal", f = function(rctx)
    return function(r)
      local res = rctx:enqueue_and_wait(r, h)
      if string.find(r:key(), "^log/") then mcp.log_req(r, res, "int") end
      return res
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`

// TestInternalStatsSections: stats items and stats slabs describe the
// internal cache as one class, 1 (the store has none), listed in items
// only while it holds items, as memcached lists its classes; no extstore
// holds anything back, so what waits for memcached's extstore flush (no
// items above class 2) never waits here.
func TestInternalStatsSections(t *testing.T) {
	addr, _ := startLua(t, writeRoutes(t, internalWatchRoutes), "")
	c := dial(t, addr)
	if got := statsOf(t, c, "items"); len(got) != 0 {
		t.Errorf("stats items of an empty cache: %v", got)
	}
	if got := c.do("set a 0 0 5\r\nhello\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	c.do("get a\r\n")
	items := statsOf(t, c, "items")
	if items["items:1:number"] != "1" || items["items:1:mem_requested"] == "" || items["items:1:evicted"] != "0" {
		t.Errorf("stats items: %v", items)
	}
	slabs := statsOf(t, c, "slabs")
	for k, want := range map[string]string{"1:used_chunks": "1", "1:get_hits": "1", "1:cmd_set": "1", "active_slabs": "1"} {
		if slabs[k] != want {
			t.Errorf("stats slabs %s = %q, want %q (%v)", k, slabs[k], want, slabs)
		}
	}
	if got := c.do("delete a\r\n"); got != "DELETED\r\n" {
		t.Fatalf("delete: %q", got)
	}
	if got := statsOf(t, c, "slabs")["1:used_chunks"]; got != "0" {
		t.Errorf("stats slabs 1:used_chunks after delete = %q, want 0", got)
	}
	if got := c.do("stats nosuch\r\n"); got != "ERROR\r\n" {
		t.Errorf("stats nosuch: %q", got)
	}
}

// TestInternalWatchDeletions: "watch deletions" gets memcached's line for
// each item a delete or md removes from the cache (observed on memcached
// 1.6.45: the key URI-encoded, the value's size without CRLF, nothing
// for md's I, which keeps the item, nor for a miss), and mcp.log_req on a
// reply of the cache names its backend internal:0, as memcached's does.
func TestInternalWatchDeletions(t *testing.T) {
	addr, _ := startLua(t, writeRoutes(t, internalWatchRoutes), "")
	w := watch(t, addr, "deletions")
	reqs := watch(t, addr, "proxyreqs")
	c := dial(t, addr)
	for _, step := range []struct{ req, want string }{
		{"set vfoo 0 0 4\r\nvbar\r\n", "STORED\r\n"},
		{"delete vfoo\r\n", "DELETED\r\n"},
		{"delete vfoo\r\n", "NOT_FOUND\r\n"},
		{"ms /b/x 2\r\nhi\r\n", "HD\r\n"},
		{"md /b/x I\r\n", "HD\r\n"},
		{"md /b/x\r\n", "HD\r\n"},
		{"set log/a 0 0 1 noreply\r\nz\r\ndelete log/a noreply\r\nmn\r\n", "MN\r\n"},
		{"mg log/b v\r\n", "EN\r\n"},
	} {
		if got := c.do(step.req); got != step.want {
			t.Fatalf("%q: got %q, want %q", step.req, got, step.want)
		}
	}
	for _, want := range []string{
		`type=deleted key=vfoo cmd=delete clsid=1 size=4`,
		`type=deleted key=%2Fb%2Fx cmd=md clsid=1 size=2`,
		`type=deleted key=log%2Fa cmd=delete clsid=1 size=1`,
	} {
		re := regexp.MustCompile(`^ts=\d+\.\d+ gid=\d+ ` + regexp.QuoteMeta(want) + "\n$")
		if got := w.watchLine(); !re.MatchString(got) {
			t.Errorf("deletions: got %q, want %q", got, want)
		}
	}
	reqs.watchLine() // set log/a
	reqs.watchLine() // delete log/a
	want := " type=101 code=17 status=0 res=ok cfd=0 be=internal:0 detail=int req=mg log/b v\n"
	if got := reqs.watchLine(); !strings.HasSuffix(got, want) {
		t.Errorf("proxyreqs: got %q, want ...%q", got, want)
	}
}
