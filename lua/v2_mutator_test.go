package lua_test

import (
	"regexp"
	"strings"
	"testing"

	"shardproxy/internal/testserver"
)

// The request and response methods of memcached's V2 proxy, and its
// mutators and inspectors, end to end: what the client sees and what the
// backend receives, as memcached 1.6.45's proxy gives them (observed on
// it with the same requests).

// step is one request of a test: what the client sends, what it must get
// back, and what the backend must receive ("-" for anything).
type step struct{ send, reply, backend string }

func runSteps(t *testing.T, c *client, tp *tap, steps []step) {
	t.Helper()
	for _, s := range steps {
		if got := c.do(s.send); got != s.reply {
			t.Errorf("%q:\n got %q\nwant %q", s.send, got, s.reply)
		}
		if got := tp.take(); s.backend != "-" && got != unjoined(s.backend) {
			t.Errorf("%q: backend got %q, want %q", s.send, got, s.backend)
		}
	}
}

func TestV2RequestMethods(t *testing.T) {
	mc := memcached(t, 1)
	port, tp := tapRelay(t, mc[0].Addr)
	addr, _ := testdataRoutes(t, "v2_methods.lua", map[int]int{11211: port}, "")
	d := dial(t, mc[0].Addr)
	d.do("ms c/match/x 3 T0\r\nabc\r\n")
	d.do("ms c/resm/x 3 F5\r\nabc\r\n")
	c := dial(t, addr)
	tail := `|;ERR has_flag(): meta flag must be a single character;false` + "\r\n"
	runSteps(t, c, tp, []step{
		// raw_line, raw_value, token_int(0 .. ntokens+1), flag_token_int
		{"mg c/meth/k N-5 T30 Oabc v k X12345678901234567890123 7\r\n",
			`SERVER_ERROR "mg c/meth/k N-5 T30 Oabc v k X12345678901234567890123 7";nil|nil nil nil nil nil nil nil nil nil 7 nil|N=true,-5|T=true,30|O=true|v=false|X=false` + tail, ""},
		{"ms c/meth/k 5 T30 F7\r\nhello\r\n",
			`SERVER_ERROR "ms c/meth/k 5 T30 F7";"hello\r\n"|nil nil nil 5 nil nil nil|N=false|T=true,30|O=false|v=false|X=false` + tail, ""},
		{"set c/meth/k 1 2 5\r\nhello\r\n",
			`SERVER_ERROR "set c/meth/k 1 2 5";"hello\r\n"|nil nil nil 1 2 5 nil|N=false|T=false|O=false|v=false|X=false` + tail, ""},
		{"gat 10 c/meth/k\r\n", `SERVER_ERROR "gat 10 c/meth/k";nil|nil nil 10 nil nil|N=false|T=false|O=false|v=false|X=false` + tail, ""},
		// flag edits: what reaches the backend, byte for byte
		{"mg c/fadd/send v\r\n", "CLIENT_ERROR bad command line format\r\n", "mg c/fadd/send v T30 Ostr F1.5\r\n"},
		{"mg c/fset/send T10 N v\r\n", "CLIENT_ERROR bad token in command line format\r\n", "mg c/fset/send T99 N v Oxy\r\n"},
		{"mg c/fset/send v\r\n", "CLIENT_ERROR bad token in command line format\r\n", "mg c/fset/send v T99 N Oxy\r\n"},
		{"mg c/frep/send T10 v k\r\n", "CLIENT_ERROR invalid flag\r\n", "mg c/frep/send N7 f k Y\r\n"},
		{"mg c/fdel/send v T10\r\n", "EN\r\n", "mg c/fdel/send\r\n"},
		{"mg c/fdel/send T10 v\r\n", "EN\r\n", "mg c/fdel/send\r\n"},
		{"ms c/fadd/send 2 T0\r\nhi\r\n", "CLIENT_ERROR bad command line format\r\n", "ms c/fadd/send 2 T0 v Ostr F1.5\r\nhi\r\n"},
		// a text request has no flags: flag_set appends its token anyway
		{"get c/text/send\r\n", "END\r\n", "get c/text/send T30\r\n"},
		{"set c/text/send 0 0 2\r\nhi\r\n", "STORED\r\n", "set c/text/send 0 0 2 T30\r\nhi\r\n"},
		{"touch c/text/send 10\r\n", "TOUCHED\r\n", "touch c/text/send 10 T30\r\n"},
		{"mg c/fadd v\r\n", `SERVER_ERROR truefalsefalsetrue|ERR request: meta flag must be a single character|ERR request: invalid flag, must be A-Z,a-z|ERR request: invalid flag argument|true|mg c/fadd v T30 Ostr F1.5` + "\r\n", ""},
		{"mg c/fdel T1 v\r\n", "SERVER_ERROR truefalsetrue|mg c/fdel;2\r\n", ""},
		{"mg c/match/go v\r\n", `SERVER_ERROR true|false,"key in response does not match request key"|false,"request opaque does not match response opaque"|true|false,"opaque in request but not in response";false|false,"opaque in request but not in response";false|ERR bad argument #2 to (anonymous) (mcp.response expected)` + "\r\n", "-"},
		{"mg c/resm/go v\r\n", `SERVER_ERROR "VA 3 f5 t-1 s3 kc/resm/x O55\r\nabc\r\n"|true"VA 3    t-1 s3 kc/resm/x O55\r\nabc\r\n","   t-1 s3 kc/resm/x O55"|falsetrue"VA 3    t-1 s3 kc/resm/x    \r\nabc\r\n"|false;ERR request: meta flag must be a single character;ERR request: invalid flag, must be A-Z,a-z|false|;nil,true,0,nil` + "\r\n", "-"},
		// flag_blank's spaces reach the client
		{"mg c/blankret v\r\n", "VA 3    t-1 kc/resm/x\r\nabc\r\n", "-"},
		// rctx:request_new and response_new: u = 2, both made in the generator
		{"mg c/newobj v\r\n", `SERVER_ERROR ERR rctx request new: object count limit reached;ERR rctx request new: object count limit reached|"",0,nil,true,0` + "\r\n", ""},
		// an empty request cannot be queued
		{"mg c/newobj/sendreq v\r\n", "SERVER_ERROR lua failure\r\n", ""},
	})
	// a closed or empty response sends the client nothing, as memcached does
	for _, k := range []string{"c/resm/ret", "c/newobj/retres"} {
		if got := c.do("mg " + k + " v\r\nmn\r\n"); got != "MN\r\n" {
			t.Errorf("%s: %q", k, got)
		}
	}
}

// TestV2Mutators runs testdata/lua/v2_mutins.lua: mutators write what
// memcached 1.6.45's do, to the backend and to the client, and their
// constructors refuse the same step lists.
func TestV2Mutators(t *testing.T) {
	mc := memcached(t, 1)
	port, tp := tapRelay(t, mc[0].Addr)
	addr, _ := testdataRoutes(t, "v2_mutins.lua", map[int]int{11211: port}, "")
	dial(t, mc[0].Addr).do("ms m/k 3 F5 T0\r\nabc\r\n")
	c := dial(t, addr)
	contains := func(req string, want ...string) {
		t.Helper()
		got := c.do(req)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: %q lacks %q", req, got, w)
			}
		}
	}
	contains("mg ctor v\r\n",
		"ctor bogus ERR mutator step 1: unknown step type 'bogus'",
		"ctor incompatible ERR mutator step 1: step incompatible with mutator type",
		"ctor cmdset long ERR mutator step 1: 'cmd' too long",
		"ctor cmdset 20 ok",
		"ctor keyset empty ERR mutator step 1: 'val' must have nonzero length",
		"ctor cmdcopy idx0 ERR mutator step 1: 'idx' argument must be greater than 0",
		"ctor cmdcopy idx1.5 ERR mutator step 1: must provide 'idx' argument as an integer",
		"ctor flagset 1 ERR mutator step 1: 'flag' must be alphanumeric",
		"ctor flagset valtable ERR mutator step 1: unsupported type for 'val'",
		"ctor flagcopyall noidx ok",
		"ctor reserr badcode ERR mutator step 1: code must be 'error', server', or 'client'",
		"ctor reserr emptymsg ERR mutator step 1: 'msg' must be a nonzero length string",
		"ctor rescodeset empty ok",
		"ctor none ERR mutator failed to initialize, no steps given",
		"ctor second bad ERR mutator step 2: unknown step type 'nope'",
		"ins res sepkey ERR inspector step 1: step incompatible with inspector type",
		"ins keyis empty ERR inspector step 1: 'str' must have nonzero length",
		"ins sepkey sep2 ERR inspector step 1: separator must be one character",
		"ins none ok")
	runSteps(t, c, tp, []step{
		// cmdcopy from a request copies the space after the command too
		{"mg m/cmdcopy v\r\n", "VA 3\r\nabc\r\n", "mg  m/k v\r\n"},
		{"mg m/cmdcopys v\r\n", "HD\r\n", "md m/k v\r\n"},
		// keycopy and valcopy from the client's ms; a second call is refused
		{"ms m/msval 5 T9\r\nhello\r\n", "HD\r\n", "ms m/msval 5 T0\r\nhello\r\n"},
		{"mg m/msstr\r\n", "HD\r\n", "ms m/k 5\r\nhello\r\n"},
	})
	contains("mg m/flagcopy T42 v\r\n",
		"nil ok n=0 {} mg m/k v", "true ok n=0 {} mg m/k T v", "false ok n=0 {} mg m/k v",
		"str ok n=0 {} mg m/k T77 v", "emptystr ok n=0 {} mg m/k T v",
		"num ok n=1 {boolean:false} mg m/k T v", "req ok n=0 {} mg m/k T42 v",
		"textreq ok n=1 {boolean:false}", "table ok n=1 {boolean:false}",
		`hello\r\n"}ok n=0 {} mg m/k v`, "noargs ok n=1 {boolean:false} mg m/k v")
	tp.take()
	if got := c.do("mg m/fca T42 v\r\n"); !regexp.MustCompile(`^HD t\d+ f0 km/k\r\n$`).MatchString(got) {
		t.Errorf("flagcopyall: %q", got)
	}
	contains("mg m/bad\r\n",
		"bad ERR mutator: failed to parse new request",
		"nokey ERR mutator: failed to parse new request",
		"keycopy res ok n=1 {boolean:false}",
		`keycopy str ok n=0 {} n=1 {"mg m/zz"}`,
		"keycopy num ok n=1 {boolean:false}",
		"wrong obj ERR bad argument #2 to (anonymous) (invalid argument to mutator object)",
		"string obj ERR bad argument #2 to (anonymous) (userdata expected, got string)",
		"onlycopy missing ERR mutator: failed to parse new request")
	runSteps(t, c, tp, []step{
		{"mg m/resnull\r\n", "EN\r\n", "-"},
		{"mg m/reserr\r\n", "CLIENT_ERROR no good\r\n", ""},
		{"mg m/reserre\r\n", "ERROR hm\r\n", ""},
		{"mg m/resbad\r\n", "STORED\r\n", ""},
		{"mg m/resok\r\n", "HD t5\r\n", ""},
		{"mg m/resval\r\n", "VA 5 f3\r\nhello\r\n", ""},
		{"ms m/resvalreq 2\r\nhi\r\n", "VA 2 f3\r\nhi\r\n", ""},
		{"mg m/resfc O77 v\r\n", "HD O77\r\n", ""},
	})
	// inspectors: req = hasflag v, flagtoken v, flagint v, flagis v "x",
	// flagtoken N, flagint N
	contains("mg m/ins/x v N5 Oabc\r\n",
		`req ok n=11 {boolean:true, boolean:true, "", boolean:true, nil:nil, boolean:true, boolean:false, boolean:true, "5", boolean:true, number:5}`,
		`sep1 ok n=1 {"m"} sep3 ok n=1 {"x"} sep0 ok n=1 {nil:nil} sepc ok n=1 {nil:nil}`,
		"wrong ERR bad argument #2 to (anonymous) (invalid argument to inspector object)",
		"res text ERR inspector error: response is not meta protocol ok n=6 {boolean:false, nil:nil, boolean:false, nil:nil, boolean:false, nil:nil}")
	contains("get m/ins/a:b:c\r\n", `sep3 ok n=1 {"a:b:c"}`, `sepc ok n=1 {"b"}`,
		"req ok n=11 {boolean:false, boolean:false, nil:nil, boolean:false, nil:nil")
	contains("mg //m/ins//x/ v N12345678901234567890123\r\n", `sep1 ok n=1 {"m"} sep3 ok n=1 {nil:nil}`,
		`"12345678901234567890123", boolean:true, nil:nil}`)
	contains("mg m/key v\r\n", "begin ok n=2 {boolean:false, boolean:true}")
	contains("mg m/key/ v\r\n", "begin ok n=2 {boolean:true, boolean:false}")
	contains("mg m/keyx v N-0 O\r\n", `"-0", boolean:true, number:0}`)
}

// On a Redis pool the same objects work where RESP gives them a meaning:
// a request mutator's tokens are the command's arguments, inspectors read
// the first key; what is about meta flags raises an error naming it.
func TestV2MutatorsRedis(t *testing.T) {
	rs := testserver.StartRedis(t)
	addr, _ := luaRoutes(t, `
function mcp_config_pools()
  return mcp.pool({ mcp.backend("r", "127.0.0.1", {{R}}) })
end
local function err(f, ...)
  local ok, e = pcall(f, ...)
  return "-ERR " .. (string.gsub(tostring(e), "^[^:]*:%d+: ", "")) .. "\r\n"
end
function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h = fg:new_handle(p)
  local setv = mcp.req_mutator_new({ t = "cmdset", cmd = "SET" }, { t = "keycopy", idx = 1 }, { t = "keyset", val = "v1" })
  local tenant = mcp.req_inspector_new({ t = "sepkey", sep = ":" }, { t = "keybegin", str = "t:" })
  fg:ready({ n = "r", u = 1, f = function(rctx)
    local nreq = rctx:request_new()
    return function(r)
      local k = r:key()
      if k == "t:mut" then
        setv(nreq, r)
        return rctx:enqueue_and_wait(nreq, h)
      elseif k == "t:line" then
        return "+" .. string.gsub(r:raw_line(), "\r\n", " ") .. "\r\n"
      elseif k == "t:ins" then
        local a, b = tenant(r)
        return "+" .. tostring(a) .. " " .. tostring(b) .. "\r\n"
      elseif k == "t:flag" then
        return err(r.flag_add, r, "T", 1)
      elseif k == "t:resmut" then
        return err(mcp.res_mutator_new, { t = "reserr", code = "server", msg = "x" })
      elseif k == "t:flagstep" then
        return err(mcp.req_mutator_new, { t = "flagset", flag = "T" })
      elseif k == "t:resins" then
        return err(mcp.res_inspector_new, { t = "hasflag", flag = "T" })
      end
      return rctx:enqueue_and_wait(r, h)
    end
  end })
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end`, map[string]int{"R": rs.Port}, "  redis: true\n")
	c := dialRESP(t, addr)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"GET", "t:mut"}, "+OK"},
		{[]string{"GET", "t:line"}, "+*2 $3 GET $6 t:line"},
		{[]string{"GET", "t:ins"}, "+t true"},
		{[]string{"GET", "t:flag"}, "-ERR flag_add: meta flags have no meaning for a Redis request"},
		{[]string{"GET", "t:resmut"}, "-ERR mcp.res_mutator_new has no meaning on a Redis pool: RESP replies have no meta codes or flags (return a string instead)"},
		{[]string{"GET", "t:flagstep"}, "-ERR mutator step 1: flagset has no meaning for a Redis request"},
		{[]string{"GET", "t:resins"}, "-ERR mcp.res_inspector_new has no meaning on a Redis pool: RESP replies have no meta flags"},
	} {
		if got := c.do(tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := redisGet(t, rs.Addr, "t:mut"); got != "$2 v1" {
		t.Errorf("the mutated SET stored %q", got)
	}
}
