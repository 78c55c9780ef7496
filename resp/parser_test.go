package resp

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"shardproxy/codec"
	"shardproxy/internal/codectest"
)

type reqWant struct {
	name  string
	route codec.Route
	keys  []string
	wire  string // "" means the input itself
	n     int    // 0 means len(input)
	local string // RouteLocal: what AppendLocal answers
	close bool
}

func TestParseRequest(t *testing.T) {
	big := strings.Repeat("v", 100)
	tests := []struct {
		name string
		in   string
		want reqWant
	}{
		// Framing.
		{"multibulk get", mb("GET", "k"), reqWant{name: "get", keys: []string{"k"}}},
		{"lower case", mb("get", "k"), reqWant{name: "get", keys: []string{"k"}}},
		{"mixed case", mb("gEt", "k"), reqWant{name: "get", keys: []string{"k"}}},
		{"set with value", mb("SET", "k", big), reqWant{name: "set", keys: []string{"k"}}},
		{"empty key and value", mb("SET", "", ""), reqWant{name: "set", keys: []string{""}}},
		{"binary key", mb("GET", "a\r\nb\x00c"), reqWant{name: "get", keys: []string{"a\r\nb\x00c"}}},
		{"only the first request", mb("GET", "a") + mb("GET", "b"), reqWant{name: "get", keys: []string{"a"}, wire: mb("GET", "a"), n: len(mb("GET", "a"))}},
		{"header LF not checked", "*2\r\n$3\rXGET\r\n$1\r\nk\r\n", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"bulk CRLF not checked", "*2\r\n$3\r\nGETxx$1\r\nkyz", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"count line CR then anything", "*2\rX$3\r\nGET\r\n$1\r\nk\r\n", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"empty multibulk skipped", "*0\r\n" + mb("PING"), reqWant{name: "ping", route: codec.RouteLocal, local: "+PONG\r\n", wire: mb("PING")}},
		{"negative multibulk skipped", "*-1\r\n*-7\r\n" + mb("PING"), reqWant{name: "ping", route: codec.RouteLocal, local: "+PONG\r\n", wire: mb("PING")}},
		{"inline", "GET k\r\n", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"inline bare LF", "GET k\n", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"inline blank lines skipped", "\r\n\n  \t\r\nGET k\r\n", reqWant{name: "get", keys: []string{"k"}, wire: mb("GET", "k")}},
		{"inline white space", "  set\tk \v v  \r\n", reqWant{name: "set", keys: []string{"k"}, wire: mb("set", "k", "v")}},
		{"inline double quotes", `set "a b" "x\x41\n\"\\\q"` + "\r\n", reqWant{name: "set", keys: []string{"a b"}, wire: mb("set", "a b", "xA\n\"\\q")}},
		{"inline single quotes", `set 'a\'b' 'c\n'` + "\r\n", reqWant{name: "set", keys: []string{"a'b"}, wire: mb("set", "a'b", `c\n`)}},
		{"inline quote inside a word", `set a"b c" d` + "\r\n", reqWant{name: "set", keys: []string{"ab c"}, wire: mb("set", "ab c", "d")}},
		{"inline empty quoted", `set "" ''` + "\r\n", reqWant{name: "set", keys: []string{""}, wire: mb("set", "", "")}},
		{"inline CR inside", "set a\rb\r\n", reqWant{name: "set", keys: []string{"a"}, wire: mb("set", "a", "b")}},
		{"inline vertical tab in a word", "get a\vb\r\n", reqWant{name: "get", keys: []string{"a\vb"}, wire: mb("get", "a\vb")}},

		// Routing classes.
		{"mget", mb("MGET", "a", "b", "a"), reqWant{name: "mget", route: codec.RouteMulti, keys: []string{"a", "b", "a"}}},
		{"mget one key", mb("MGET", "a"), reqWant{name: "mget", route: codec.RouteKey, keys: []string{"a"}}},
		{"mset", mb("MSET", "a", "1", "b", "2"), reqWant{name: "mset", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"del", mb("DEL", "a", "b"), reqWant{name: "del", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"unlink", mb("UNLINK", "a", "b"), reqWant{name: "unlink", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"exists twice", mb("EXISTS", "a", "a"), reqWant{name: "exists", route: codec.RouteMulti, keys: []string{"a", "a"}}},
		{"touch", mb("TOUCH", "a", "b"), reqWant{name: "touch", route: codec.RouteMulti, keys: []string{"a", "b"}}},
		{"msetnx", mb("MSETNX", "a", "1", "b", "2"), reqWant{name: "msetnx", route: codec.RouteSame, keys: []string{"a", "b"}}},
		{"sinter", mb("SINTER", "a", "b", "c"), reqWant{name: "sinter", route: codec.RouteSame, keys: []string{"a", "b", "c"}}},
		{"rename", mb("RENAME", "a", "b"), reqWant{name: "rename", route: codec.RouteSame, keys: []string{"a", "b"}}},
		{"smove", mb("SMOVE", "a", "b", "m"), reqWant{name: "smove", route: codec.RouteSame, keys: []string{"a", "b"}}},
		{"bitop", mb("BITOP", "AND", "d", "a", "b"), reqWant{name: "bitop", route: codec.RouteSame, keys: []string{"d", "a", "b"}}},
		{"eval with keys", mb("EVAL", "return 1", "2", "a", "b", "arg"), reqWant{name: "eval", route: codec.RouteSame, keys: []string{"a", "b"}}},
		{"eval without keys", mb("EVAL", "return 1", "0"), reqWant{name: "eval", route: codec.RouteSame}},
		{"eval bad numkeys", mb("EVAL", "return 1", "x", "a"), reqWant{name: "eval", route: codec.RouteSame}},
		{"zunionstore", mb("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2"), reqWant{name: "zunionstore", route: codec.RouteSame, keys: []string{"d", "a", "b"}}},
		{"xread", mb("XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"), reqWant{name: "xread", route: codec.RouteSame, keys: []string{"s1", "s2"}}},
		{"sort store", mb("SORT", "k", "BY", "store", "STORE", "d"), reqWant{name: "sort", route: codec.RouteSame, keys: []string{"k", "d"}}},
		{"command", mb("COMMAND"), reqWant{name: "command", route: codec.RouteAny}},
		{"command info", mb("COMMAND", "INFO", "get"), reqWant{name: "command|info", route: codec.RouteAny}},
		{"object help", mb("OBJECT", "HELP"), reqWant{name: "object|help", route: codec.RouteAny}},
		{"object encoding", mb("OBJECT", "ENCODING", "k"), reqWant{name: "object|encoding", keys: []string{"k"}}},
		{"memory usage", mb("MEMORY", "USAGE", "k", "SAMPLES", "5"), reqWant{name: "memory|usage", keys: []string{"k"}}},
		{"xinfo stream", mb("XINFO", "STREAM", "s"), reqWant{name: "xinfo|stream", keys: []string{"s"}}},
		{"flushdb", mb("FLUSHDB"), reqWant{name: "flushdb", route: codec.RouteAll}},
		{"script load", mb("SCRIPT", "LOAD", "return 1"), reqWant{name: "script|load", route: codec.RouteAll}},
		{"time", mb("TIME"), reqWant{name: "time", route: codec.RouteAny}},

		// Local.
		{"ping", mb("PING"), reqWant{name: "ping", route: codec.RouteLocal, local: "+PONG\r\n"}},
		{"ping message", mb("PING", "hi"), reqWant{name: "ping", route: codec.RouteLocal, local: "$2\r\nhi\r\n"}},
		{"inline ping", "PING\r\n", reqWant{name: "ping", route: codec.RouteLocal, local: "+PONG\r\n", wire: mb("PING")}},
		{"echo", mb("ECHO", "a\r\nb"), reqWant{name: "echo", route: codec.RouteLocal, local: "$4\r\na\r\nb\r\n"}},
		{"quit", mb("QUIT"), reqWant{name: "quit", route: codec.RouteLocal, local: "+OK\r\n", close: true}},
		{"quit with arguments", mb("QUIT", "now"), reqWant{name: "quit", route: codec.RouteLocal, local: "+OK\r\n", close: true}},
		{"select 0", mb("SELECT", "0"), reqWant{name: "select", route: codec.RouteLocal, local: "+OK\r\n"}},
		{"reset", mb("RESET"), reqWant{name: "reset", route: codec.RouteLocal, local: "+RESET\r\n"}},
		{"client reply on", mb("CLIENT", "REPLY", "on"), reqWant{name: "client|reply", route: codec.RouteLocal, local: "+OK\r\n"}},
		{"client getname", mb("CLIENT", "GETNAME"), reqWant{name: "client|getname", route: codec.RouteLocal, local: "$-1\r\n"}},
		{"client setname", mb("CLIENT", "SETNAME", "app"), reqWant{name: "client|setname", route: codec.RouteLocal, local: "+OK\r\n"}},
		{"client setinfo", mb("CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)"), reqWant{name: "client|setinfo", route: codec.RouteLocal, local: "+OK\r\n"}},
		{"info", mb("INFO"), reqWant{name: "info", route: codec.RouteLocal, local: "$32\r\n# Proxy\r\nuptime:7\r\nrequests:42\r\n\r\n"}},
		{"hello 2", mb("HELLO", "2"), reqWant{name: "hello", route: codec.RouteLocal}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, codec.Options{}, tc.in)
			if err != nil {
				t.Fatalf("%s", describeRequest(req, n, err))
			}
			w := tc.want
			wantWire, wantN := w.wire, w.n
			if wantWire == "" {
				wantWire = tc.in
			}
			if wantN == 0 {
				wantN = len(tc.in)
			}
			keys := make([]string, len(req.Keys))
			for i, k := range req.Keys {
				keys[i] = string(k)
			}
			if req.Name != w.name || req.Route != w.route || n != wantN || string(req.Wire) != wantWire ||
				!slices.Equal(keys, w.keys) || req.Close != w.close || req.Mode != codec.ModeNormal {
				t.Fatalf("got  %s\nwant %s route=%s keys=%q n=%d wire=%q close=%v", describeRequest(req, n, nil),
					w.name, routeNames[w.route], w.keys, wantN, wantWire, w.close)
			}
			if w.local != "" {
				if got := string(dialect.AppendLocal(nil, req, testEnv{})); got != w.local {
					t.Fatalf("local answer %q, want %q", got, w.local)
				}
			}
		})
	}
}

func TestParseRequestErrors(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	tests := []struct {
		name  string
		in    string
		reply string // "" with close: dropped without a word
		close bool
	}{
		{"count not a number", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count with plus", "*+1\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count leading zero", "*01\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count empty", "*\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count over the limit", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count line ended by LF only", "*1\n$4\r\nPING\r\n", "-ERR Protocol error: invalid multibulk length\r\n", true},
		{"count line too long", "*" + long, "-ERR Protocol error: too big mbulk count string\r\n", true},
		{"NUL in count line", "*1\x00" + long, "-ERR Protocol error: too big mbulk count string\r\n", true},
		{"expected dollar", "*1\r\nx3\r\n", "-ERR Protocol error: expected '$', got 'x'\r\n", true},
		{"expected dollar got CR", "*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n", true},
		{"bulk length negative", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"bulk length not a number", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"bulk length 1 GB", "*1\r\n$1000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n", true},
		{"bulk length line too long", "*1\r\n$" + long, "-ERR Protocol error: too big bulk count string\r\n", true},
		{"inline too long", long + "x", "-ERR Protocol error: too big inline request\r\n", true},
		{"inline NUL never ends", "PING\x00\r\n" + long, "-ERR Protocol error: too big inline request\r\n", true},
		{"unbalanced double quote", "SET \"a b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true},
		{"unbalanced single quote", "SET 'a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true},
		{"quote followed by a letter", "SET \"a\"b c\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", true},
		{"http post", "POST / HTTP/1.1\r\n", "", true},
		{"http host", mb("Host:", "x"), "", true},
		{"unknown command", mb("FOO", "a", "b"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n", false},
		{"unknown command no args", "foo\r\n", "-ERR unknown command 'foo', with args beginning with: \r\n", false},
		{"unknown command CRLF in args", mb("foo", "a\r\n"), "-ERR unknown command 'foo', with args beginning with: 'a  ' \r\n", false},
		{"unknown command long args", mb("foo", strings.Repeat("a", 100), strings.Repeat("b", 100), "c"),
			"-ERR unknown command 'foo', with args beginning with: '" + strings.Repeat("a", 100) + "' '" + strings.Repeat("b", 25) + "' \r\n", false},
		{"unknown command empty name", mb(""), "-ERR unknown command '', with args beginning with: \r\n", false},
		{"subcommand name as a command", mb("client|id"), "-ERR unknown command 'client|id', with args beginning with: \r\n", false},
		{"unknown subcommand", "object foo\r\n", "-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n", false},
		{"container alone", "object\r\n", "-ERR wrong number of arguments for 'object' command\r\n", false},
		{"wrong arity", mb("GET"), "-ERR wrong number of arguments for 'get' command\r\n", false},
		{"wrong arity subcommand", mb("CLIENT", "SETNAME"), "-ERR wrong number of arguments for 'client|setname' command\r\n", false},
		{"mset odd", mb("MSET", "a", "1", "b"), "-ERR wrong number of arguments for 'mset' command\r\n", false},
		{"ping too many", mb("PING", "a", "b"), "-ERR wrong number of arguments for 'ping' command\r\n", false},
		{"keys", mb("KEYS", "*"), "-ERR KEYS is not supported by shardproxy: it needs every server\r\n", false},
		{"config get", mb("CONFIG", "GET", "save"), "-ERR CONFIG GET is not supported by shardproxy: it administers a single server\r\n", false},
		{"client reply bad mode", mb("CLIENT", "REPLY", "NONE"), "-ERR syntax error\r\n", false},
		{"client pause", mb("CLIENT", "PAUSE", "10"), "-ERR CLIENT PAUSE is not supported by shardproxy: it administers a single server\r\n", false},
		{"select other db", mb("SELECT", "3"), "-ERR SELECT 3 is not supported by shardproxy: this pool serves db 0 only\r\n", false},
		{"select not a number", mb("SELECT", "x"), "-ERR value is not an integer or out of range\r\n", false},
		{"select negative", mb("SELECT", "-1"), "-ERR DB index is out of range\r\n", false},
		{"auth without password", mb("AUTH", "x"), "-ERR Client sent AUTH, but no password is set\r\n", false},
		{"hello 4", mb("HELLO", "4"), "-NOPROTO unsupported protocol version\r\n", false},
		{"hello x", mb("HELLO", "x"), "-ERR Protocol version is not an integer or out of range\r\n", false},
		{"hello bad option", mb("HELLO", "2", "foo"), "-ERR Syntax error in HELLO option 'foo'\r\n", false},
		{"client bad name", mb("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n", false},
		{"client setinfo bad option", mb("CLIENT", "SETINFO", "x", "y"), "-ERR Unrecognized option 'x'\r\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, codec.Options{}, tc.in)
			if err == nil {
				t.Fatalf("accepted: %s", describeRequest(req, n, nil))
			}
			pe := codectest.ProtocolError(t, err)
			if pe.Reply != tc.reply || pe.Close != tc.close {
				t.Fatalf("got reply %q close %v, want %q close %v", pe.Reply, pe.Close, tc.reply, tc.close)
			}
			if !pe.Close && pe.N != len(tc.in) {
				t.Fatalf("N = %d, want %d", pe.N, len(tc.in))
			}
		})
	}
}

// TestParseRequestLimits checks the configurable limits.
func TestParseRequestLimits(t *testing.T) {
	o := codec.Options{MaxLine: 100, MaxValue: 10, MaxKey: 4, Deny: []string{"flush_all", "GETDEL", "client|id"}}
	tests := []struct {
		name, in, reply string
		close           bool
	}{
		{"value of MaxValue", mb("SET", "k", strings.Repeat("v", 10)), "", false},
		{"value over MaxValue", mb("SET", "k", strings.Repeat("v", 11)), "-ERR Protocol error: invalid bulk length\r\n", true},
		{"inline of MaxLine", strings.Repeat(" ", 96) + "PING\n", "", false},
		{"inline over MaxLine", strings.Repeat(" ", 97) + "PING\n", "-ERR Protocol error: too big inline request\r\n", true},
		{"key over MaxKey", mb("GET", "kkkkk"), "-ERR key is longer than 4 bytes\r\n", false},
		{"request over the limit", "*300\r\n" + strings.Repeat("$10\r\n0123456789\r\n", 300), "-ERR Protocol error: request larger than the proxy's limit of 4206 bytes\r\n", true},
		{"flush_all denies flushdb", mb("FLUSHDB"), "-ERR FLUSHDB is disabled for this pool\r\n", false},
		{"denied command", mb("GETDEL", "k"), "-ERR GETDEL is disabled for this pool\r\n", false},
		{"denied subcommand", mb("CLIENT", "ID"), "-ERR CLIENT ID is disabled for this pool\r\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, o, tc.in)
			if tc.reply == "" {
				if err != nil {
					t.Fatalf("%s", describeRequest(req, n, err))
				}
				return
			}
			pe := codectest.ProtocolError(t, err)
			if pe.Reply != tc.reply || pe.Close != tc.close {
				t.Fatalf("got reply %q close %v, want %q close %v", pe.Reply, pe.Close, tc.reply, tc.close)
			}
		})
	}
}

// validRequests are well-formed requests whose every strict prefix must be
// incomplete.
var validRequests = []string{
	mb("GET", "k"),
	mb("SET", "k", strings.Repeat("v", 100)),
	mb("SET", "", ""),
	mb("MGET", "a", "b", "c"),
	mb("PING"),
	"*0\r\n" + mb("PING"),
	"*2\r\n$3\rXGET\r\n$1\r\nkxy",
	"PING\r\n",
	"GET k\n",
	"\r\n\r\nSET \"a b\" 'c'\r\n",
	mb("EVAL", "return 1", "1", "k"),
}

func TestParseRequestPrefixes(t *testing.T) {
	for _, in := range validRequests {
		p := dialect.NewRequestParser(codec.Options{})
		var req codec.Request
		n, err := p.ParseRequest([]byte(in), &req)
		if err != nil || n != len(in) {
			t.Fatalf("%q: n=%d err=%v", in, n, err)
		}
		for i := range len(in) {
			var r codec.Request
			if m, err := p.ParseRequest([]byte(in[:i]), &r); !errors.Is(err, codec.ErrIncomplete) || m != 0 {
				t.Errorf("prefix %q of %q: n=%d %s, want incomplete", in[:i], in, m, describeRequest(&r, m, err))
			}
		}
	}
}

// TestSession runs request sequences through one parser: the state a
// session keeps (authentication, name) and the order of checks.
func TestSession(t *testing.T) {
	auth := codec.Options{Password: "sekret", DB: 2}
	auth2 := codec.Options{Password: "sekret", DB: 2, RESP2Only: true}
	acl := codec.Options{Password: "sekret", Username: "app"}
	tests := []struct {
		name string
		o    codec.Options
		in   string
		want []string
	}{
		{"noauth before auth", auth, "GET k\r\nPING\r\nAUTH nope\r\nGET k\r\nAUTH sekret\r\nGET k\r\n", []string{
			"-NOAUTH Authentication required.\r\n",
			"-NOAUTH Authentication required.\r\n",
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			"-NOAUTH Authentication required.\r\n",
			"+OK\r\n",
			"-> " + mb("GET", "k"),
		}},
		{"unknown command and arity before noauth", auth, "FOO\r\nGET\r\nGET k\r\n", []string{
			"-ERR unknown command 'FOO', with args beginning with: \r\n",
			"-ERR wrong number of arguments for 'get' command\r\n",
			"-NOAUTH Authentication required.\r\n",
		}},
		{"auth default user", auth, "AUTH default sekret\r\nSELECT 2\r\nSELECT 0\r\n", []string{
			"+OK\r\n", "+OK\r\n",
			"-ERR SELECT 0 is not supported by shardproxy: this pool serves db 2 only\r\n",
		}},
		{"auth syntax", auth, "AUTH a b c\r\nAUTH\r\n", []string{
			"-ERR syntax error\r\n",
			"-ERR wrong number of arguments for 'auth' command\r\n",
		}},
		{"failed auth keeps the session authenticated", auth, "AUTH sekret\r\nAUTH nope\r\nGET k\r\n", []string{
			"+OK\r\n",
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			"-> " + mb("GET", "k"),
		}},
		{"acl user", acl, "AUTH sekret\r\nAUTH default sekret\r\nAUTH app sekret\r\nGET k\r\n", []string{
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			"+OK\r\n",
			"-> " + mb("GET", "k"),
		}},
		{"hello without auth", auth, "HELLO\r\nHELLO 2\r\n", []string{replyHelloNoAuth, replyHelloNoAuth}},
		{"hello 3 on RESP2 only", auth2, "HELLO 3 AUTH default sekret\r\nCLIENT GETNAME\r\n", []string{
			"-NOPROTO unsupported protocol version\r\n", // a Lua pool's sessions stay on RESP2
			"-NOAUTH Authentication required.\r\n",
		}},
		{"hello 3 auth, then 2", auth, "HELLO 3 AUTH default nope\r\nCLIENT GETNAME\r\n" +
			"HELLO 3 AUTH default sekret\r\nCLIENT GETNAME\r\nINFO proxy\r\nHELLO 4\r\nCLIENT GETNAME\r\n" +
			"HELLO 2\r\nCLIENT GETNAME\r\nHELLO 3\r\nRESET\r\nAUTH sekret\r\nCLIENT GETNAME\r\n", []string{
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			"-NOAUTH Authentication required.\r\n",
			string(appendHello(nil, 0, 3, testEnv{})),
			"_\r\n",
			string(appendInfo(nil, 3, testEnv{})),
			"-NOPROTO unsupported protocol version\r\n",
			"_\r\n", // a refused HELLO leaves the protocol as it was
			string(appendHello(nil, 0, 0, testEnv{})),
			"$-1\r\n",
			string(appendHello(nil, 0, 3, testEnv{})),
			"+RESET\r\n", "+OK\r\n", "$-1\r\n", // RESET goes back to RESP2
		}},
		{"hello auth", auth, "HELLO 2 AUTH default nope\r\nHELLO 2 AUTH default sekret SETNAME app\r\nCLIENT GETNAME\r\n", []string{
			"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
			string(appendHello(nil, 0, 0, testEnv{})), // the id is the parser's; checked below
			"$3\r\napp\r\n",
		}},
		{"unauthenticated big count", auth, "*11\r\n", []string{"-ERR Protocol error: unauthenticated multibulk length\r\n", "closed"}},
		{"unauthenticated big bulk", auth, "*1\r\n$16385\r\n", []string{"-ERR Protocol error: unauthenticated bulk length\r\n", "closed"}},
		{"authenticated big count", auth, "AUTH sekret\r\n*11\r\n", []string{"+OK\r\n", "incomplete"}},
		{"quit before auth", auth, "QUIT\r\nGET k\r\n", []string{"+OK\r\n", "closed"}},
		{"reset deauthenticates", auth, "AUTH sekret\r\nCLIENT SETNAME a\r\nRESET\r\nCLIENT GETNAME\r\n", []string{
			"+OK\r\n", "+OK\r\n", "+RESET\r\n", "-NOAUTH Authentication required.\r\n",
		}},
		{"client name", codec.Options{}, "CLIENT GETNAME\r\nCLIENT SETNAME x\r\nCLIENT GETNAME\r\nCLIENT SETNAME \"\"\r\nCLIENT GETNAME\r\n", []string{
			"$-1\r\n", "+OK\r\n", "$1\r\nx\r\n", "+OK\r\n", "$-1\r\n",
		}},
		{"unsupported after auth", auth, "KEYS *\r\n", []string{"-NOAUTH Authentication required.\r\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAll(t, tc.o, tc.in)
			for i := range got {
				switch { // HELLO: blank out the id
				case strings.HasPrefix(got[i], "*14\r\n$6\r\nserver"):
					got[i] = string(appendHello(nil, 0, 0, testEnv{}))
				case strings.HasPrefix(got[i], "%7\r\n$6\r\nserver"):
					got[i] = string(appendHello(nil, 0, 3, testEnv{}))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestClientIDs(t *testing.T) {
	ids := map[string]bool{}
	for range 3 {
		got := parseAll(t, codec.Options{}, "CLIENT ID\r\n")
		if len(got) != 1 || !strings.HasPrefix(got[0], ":") || ids[got[0]] {
			t.Fatalf("CLIENT ID %q (seen %v)", got, ids)
		}
		ids[got[0]] = true
	}
	got := parseAll(t, codec.Options{}, "CLIENT ID\r\nHELLO\r\n")
	id := strings.TrimSuffix(strings.TrimPrefix(got[0], ":"), "\r\n")
	if !strings.Contains(got[1], "$2\r\nid\r\n:"+id+"\r\n") {
		t.Fatalf("HELLO %q does not carry the session's id %s", got[1], id)
	}
}
