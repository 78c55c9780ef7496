package lua_test

import (
	"strings"
	"testing"
)

// The wire tests check what reaches a backend from a Lua pool, byte for
// byte, against what memcached 1.6.45's proxy sends for the same route
// file and the same client bytes (observed by hand through a logging
// relay).

// wireRoutes passes every key command to the backend through the tap;
// keys starting lt or rt are trimmed by 3 bytes first (left or right),
// keys starting kt are trimmed and reported, keys starting tok report
// what the handler sees of the request.
const wireRoutes = `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("tap", "127.0.0.1", {{TAP}}) })
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  fg:ready({ n = "wire", f = function(rctx)
    return function(r)
      local k = r:key()
      if string.find(k, "^lt") then r:ltrimkey(3) end
      if string.find(k, "^rt") then r:rtrimkey(3) end
      if string.find(k, "^kt") then
        local n = r:ltrimkey(2)
        return "SERVER_ERROR n=" .. tostring(n) .. " key=" .. r:key() .. " tok=" .. r:token(2) .. "\r\n"
      end
      if string.find(k, "^tok") then
        return string.format("SERVER_ERROR nt=%d last=%s q=%s\r\n", r:ntokens(), r:token(r:ntokens()), tostring(r:has_flag("q")))
      end
      return rctx:enqueue_and_wait(r, h)
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`

// wirePool starts a memcached, a tap in front of it and a Lua pool of
// wireRoutes; it returns the pool's address and the tap.
func wirePool(t *testing.T) (string, *tap) {
	t.Helper()
	mc := memcached(t, 1)
	tp := newTap(t, mc[0].Addr)
	addr, _ := luaRoutes(t, wireRoutes, map[string]int{"TAP": tp.port}, "")
	return addr, tp
}

// TestV1QuietWire: a quiet meta request reaches the backend with its "q"
// overwritten by a space and no "mn" after it, as memcached's proxy sends
// it; the client sees what quiet mode shows (a miss hidden, success hidden
// but for mg, NF, NS and EX shown).
func TestV1QuietWire(t *testing.T) {
	addr, tp := wirePool(t)
	c := dial(t, addr)
	req := "ms qk 2\r\nhi\r\nms qn 1\r\n5\r\n" +
		"mg qk q\r\nmg qk k q\r\nmg qk v q\r\nmg qnokey v q\r\nmg qnokey q\r\n" +
		"md qnokey q\r\nma qnokey q\r\nma qn q\r\nma qn q v\r\n" +
		"ms qk2 2 q\r\nhi\r\nms qnokey 2 q MA\r\nhi\r\nms qk 2 q C999\r\nhi\r\nmd qk2 q\r\nmn\r\n"
	c.send(req)
	want := "HD\r\nHD\r\nHD\r\nHD kqk\r\nVA 2\r\nhi\r\nNF\r\nNF\r\nNS\r\nEX\r\nMN\r\n"
	if got := c.readN(len(want)); got != want {
		t.Errorf("client got %q, want %q", got, want)
	}
	tp.waitSent(t, "quiet requests",
		"ms qk 2\r\nhi\r\nms qn 1\r\n5\r\n"+
			"mg qk  \r\nmg qk k  \r\nmg qk v  \r\nmg qnokey v  \r\nmg qnokey  \r\n"+
			"md qnokey  \r\nma qnokey  \r\nma qn  \r\nma qn   v\r\n"+
			"ms qk2 2  \r\nhi\r\nms qnokey 2   MA\r\nhi\r\nms qk 2   C999\r\nhi\r\nmd qk2  \r\n")
	// The handler sees the request as the client sent it.
	if got := c.do("mg tok v q\r\n"); got != "SERVER_ERROR nt=4 last=q q=true\r\n" {
		t.Errorf("handler's view of a quiet request: %q", got)
	}
}

// TestV1NoreplyWire: "noreply" reaches the backend as "noreplY", which it
// ignores, and the proxy hides its answer, as memcached's proxy does; but
// for delete, which memcached refuses with such a token (memcached's
// proxy then fails the delete), whose noreply is removed instead.
func TestV1NoreplyWire(t *testing.T) {
	addr, tp := wirePool(t)
	c := dial(t, addr)
	c.send("set nk 0 0 1 noreply\r\n5\r\nincr nk 2 noreply\r\ntouch nk 100 noreply\r\n" +
		"append nk 0 0 1 noreply\r\n1\r\ndelete dk noreply\r\nmn\r\n")
	if got := c.readN(len("MN\r\n")); got != "MN\r\n" {
		t.Errorf("client got %q, want only MN", got)
	}
	if got := c.do("get nk\r\n"); got != "VALUE nk 0 2\r\n71\r\nEND\r\n" {
		t.Errorf("get nk: %q", got)
	}
	tp.waitSent(t, "noreply requests", "set nk 0 0 1 noreplY\r\n5\r\nincr nk 2 noreplY\r\n"+
		"touch nk 100 noreplY\r\nappend nk 0 0 1 noreplY\r\n1\r\ndelete dk\r\nget nk\r\n")
	if got := c.do("set tok 0 0 1 noreply\r\n1\r\nmn\r\n"); got != "MN\r\n" {
		t.Errorf("a noreply request whose handler returns a string: %q", got)
	}
	c.send("delete nk noreply\r\n")
	if got := c.do("get nk\r\n"); got != "END\r\n" {
		t.Errorf("delete noreply left the key: %q", got)
	}
}

// TestV1TrimKeyWire: r:ltrimkey(n) and r:rtrimkey(n) turn the trimmed
// bytes into spaces on the wire, as memcached's proxy does; the key the
// handler and the backend see is the rest; n may be the whole key; more
// is an error.
func TestV1TrimKeyWire(t *testing.T) {
	addr, tp := wirePool(t)
	c := dial(t, addr)
	for _, tc := range []struct{ req, reply, sent string }{
		{"mg ltabcdef v\r\n", "EN\r\n", "mg    bcdef v\r\n"},
		{"mg rtabcdef v\r\n", "EN\r\n", "mg rtabc    v\r\n"},
		{"mg lt12 v\r\n", "EN\r\n", "mg    2 v\r\n"},
		{"ms ltabcdef 2 T0\r\nhi\r\n", "HD\r\n", "ms    bcdef 2 T0\r\nhi\r\n"},
		{"get ltabcdef\r\n", "VALUE bcdef 0 2\r\nhi\r\nEND\r\n", "get    bcdef\r\n"},
		{"mg ltabcdef v q\r\nmn\r\n", "VA 2\r\nhi\r\n", "mg    bcdef v  \r\n"},
		{"mg lt v\r\n", "SERVER_ERROR lua failure\r\n", ""},
		{"mg ktabcd v\r\n", "SERVER_ERROR n=2 key=abcd tok=abcd\r\n", ""},
	} {
		tp.reset()
		if got := c.do(tc.req); got != tc.reply {
			t.Errorf("%q: client got %q, want %q", tc.req, got, tc.reply)
		}
		if tc.sent != "" {
			tp.waitSent(t, tc.req, tc.sent)
		} else if got := tp.sent(); got != "" {
			t.Errorf("%q: the backend received %q", tc.req, got)
		}
		if strings.Contains(tc.req, "mn") {
			c.line() // MN
		}
	}
}

// TestV1MultiGetInPlace: a multi-key get is answered key by key in the
// client's order, each key's answer in its place, as memcached's proxy
// does: a failed backend, a handler's error, a too-long key fail only
// their key; a handler's string goes as it is (without a final END); a
// first key that starts past the line's 20th byte is a malformed request.
func TestV1MultiGetInPlace(t *testing.T) {
	mc := memcached(t, 1)
	tp := newTap(t, mc[0].Addr)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return {
    main = mcp.pool({ mcp.backend("main", "127.0.0.1", {{TAP}}) }),
    refused = mcp.pool({ mcp.backend("refused", "127.0.0.1", {{REFUSED}}) }),
  }
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local main, refused = fg:new_handle(p.main), fg:new_handle(p.refused)
  fg:ready({ n = "multi", f = function(rctx)
    return function(r)
      local k = r:key()
      if string.find(k, "^refused/") then return rctx:enqueue_and_wait(r, refused) end
      if string.find(k, "^err/") then error("boom") end
      if string.find(k, "^strv/") then return "VALUE strv 0 1\r\nx\r\nEND\r\n" end
      if string.find(k, "^strh/") then return "HD\r\n" end
      return rctx:enqueue_and_wait(r, main)
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`, map[string]int{"TAP": tp.port, "REFUSED": closedPort(t)}, "")
	c := dial(t, addr)
	if got := c.do("set mfoo 0 0 3\r\nbar\r\n"); got != "STORED\r\n" {
		t.Fatalf("set: %q", got)
	}
	long := strings.Repeat("k", 251)
	hit := "VALUE mfoo 0 3\r\nbar\r\n"
	for _, tc := range []struct{ req, want, sent string }{
		{"get mfoo refused/x\r\n", hit + "SERVER_ERROR backend failure\r\nEND\r\n", "get mfoo\r\n"},
		{"get mfoo " + long + " mnokey\r\n", hit + "CLIENT_ERROR key too long\r\nEND\r\n", "get mfoo\r\nget mnokey\r\n"},
		{"get " + long + " mfoo\r\n", "CLIENT_ERROR key too long\r\n" + hit + "END\r\n", "get mfoo\r\n"},
		{"get " + long + " " + long + "\r\n", "CLIENT_ERROR key too long\r\nCLIENT_ERROR key too long\r\nEND\r\n", ""},
		{"get mfoo strv/ strh/ err/x mnokey\r\n", hit + "VALUE strv 0 1\r\nx\r\nHD\r\nSERVER_ERROR lua failure\r\nEND\r\n", "get mfoo\r\nget mnokey\r\n"},
		// memcached's proxy keeps the spaces before each key; shardproxy
		// sends "get mfoo\r\nget x\r\n": "-" leaves the backend unchecked
		{"get" + strings.Repeat(" ", 17) + "mfoo x\r\n", hit + "END\r\n", "-"},
		{"get" + strings.Repeat(" ", 18) + "mfoo x\r\n", "CLIENT_ERROR malformed request\r\n", ""},
		{"gats 12345678901234 nokey1 nokey2\r\n", "END\r\n", "gats 12345678901234 nokey1\r\ngats 12345678901234 nokey2\r\n"},
		{"gats 123456789012345 nokey1 nokey2\r\n", "CLIENT_ERROR malformed request\r\n", ""},
		{"get" + strings.Repeat(" ", 18) + "mfoo\r\n", hit + "END\r\n", "get" + strings.Repeat(" ", 18) + "mfoo\r\n"},
	} {
		tp.reset()
		c.send(tc.req)
		if got := c.readN(len(tc.want)); got != tc.want {
			t.Errorf("%q: client got %q, want %q", tc.req, got, tc.want)
		}
		switch {
		case tc.sent == "-":
		case tc.sent != "":
			tp.waitSent(t, tc.req, tc.sent)
		default:
			if got := tp.sent(); got != "" {
				t.Errorf("%q: the backend received %q", tc.req, got)
			}
		}
	}
}
