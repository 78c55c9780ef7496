package resp

import (
	"errors"
	"strings"
	"testing"

	"shardproxy/codec"
)

var configOpts = codec.Options{Keyspace: true, ServerConfig: true}

// TestConfigRoutes: with ServerConfig, CONFIG GET, SET, RESETSTAT and
// REWRITE go to every server; without it they are refused as today.
// CONFIG HELP goes to any one server either way.
func TestConfigRoutes(t *testing.T) {
	for _, in := range [][]string{
		{"CONFIG", "GET", "maxmemory*"}, {"config", "get", "a", "b"},
		{"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"},
		{"CONFIG", "SET", "maxmemory", "0", "hz", "10"},
		{"CONFIG", "SET", "a", "b", "c"}, // the servers answer its syntax error
		{"CONFIG", "RESETSTAT"}, {"CONFIG", "REWRITE"},
	} {
		req, n, err := parse(t, configOpts, mb(in...))
		if err != nil || req.Route != codec.RouteAll || len(req.Keys) != 0 || req.Wire == nil {
			t.Errorf("%q with ServerConfig: %s", in, describeRequest(req, n, err))
		}
		for _, o := range []codec.Options{{Keyspace: true}, {}} {
			req, n, err = parse(t, o, mb(in...))
			want := `reject reply="-ERR CONFIG ` + strings.ToUpper(in[1]) +
				` is not supported by shardproxy: it administers a single server\r\n"`
			if got := describeRequest(req, n, err); !strings.HasPrefix(got, want) {
				t.Errorf("%q without ServerConfig: %s", in, got)
			}
		}
	}
	for _, o := range []codec.Options{configOpts, {}} {
		if req, n, err := parse(t, o, mb("CONFIG", "HELP")); err != nil || req.Route != codec.RouteAny {
			t.Errorf("CONFIG HELP: %s", describeRequest(req, n, err))
		}
	}
	// Arity is checked first, in redis-server's words.
	for _, in := range [][]string{{"CONFIG", "GET"}, {"CONFIG", "SET", "a"}, {"CONFIG", "RESETSTAT", "x"}} {
		req, n, err := parse(t, configOpts, mb(in...))
		if got := describeRequest(req, n, err); !strings.Contains(got, "wrong number of arguments for 'config|") {
			t.Errorf("%q: %s", in, got)
		}
	}
}

// TestConfigSetGuarded: CONFIG SET of a setting the proxy depends on is
// refused, naming it, in any case and anywhere among the pairs.
func TestConfigSetGuarded(t *testing.T) {
	refused := map[string]string{
		"requirepass":                     whyAccess,
		"PORT":                            whyAccess,
		"bind":                            whyAccess,
		"unixsocket":                      whyAccess,
		"protected-mode":                  whyAccess,
		"tls-port":                        whyAccess,
		"TLS-Cert-File":                   whyAccess,
		"tls-auth-clients":                whyAccess,
		"masterauth":                      whyRepl,
		"masteruser":                      whyRepl,
		"cluster-announce-ip":             whyAddress,
		"cluster-announce-hostname":       whyAddress,
		"cluster-preferred-endpoint-type": whyAddress,
		"replica-announce-ip":             whyAddress,
		"slave-announce-port":             whyAddress,
		"maxclients":                      whyShared,
		"timeout":                         whyShared,
		"client-output-buffer-limit":      whyShared,
		"client-query-buffer-limit":       whyShared,
		"proto-max-bulk-len":              whyShared,
		"maxmemory-clients":               whyShared,
	}
	for name, why := range refused {
		for _, in := range [][]string{
			{"CONFIG", "SET", name, "1"},
			{"CONFIG", "SET", "maxmemory", "0", name, "1"},
		} {
			req, n, err := parse(t, configOpts, mb(in...))
			want := `reject reply="-ERR CONFIG SET ` + strings.ToLower(name) + ` is not allowed through shardproxy: ` + why + `\r\n"`
			if got := describeRequest(req, n, err); !strings.HasPrefix(got, want) {
				t.Errorf("%q: %s\nwant %s", in, got, want)
			}
		}
	}
	// Names that only look like them are carried; so is reading them.
	for _, in := range [][]string{
		{"CONFIG", "SET", "tls-", "x"}, {"CONFIG", "SET", "maxmemory", "1"}, {"CONFIG", "SET", "timeouts", "1"},
		{"CONFIG", "SET", "portx", "1"}, {"CONFIG", "SET", "cluster-announce", "1"},
		{"CONFIG", "SET", "hz", "10", "maxmemory-policy", "noeviction"},
		{"CONFIG", "GET", "requirepass"}, {"CONFIG", "GET", "tls-*"},
	} {
		if req, n, err := parse(t, configOpts, mb(in...)); err != nil || req.Route != codec.RouteAll {
			t.Errorf("%q: %s", in, describeRequest(req, n, err))
		}
	}
	// A long name is cut in the reply.
	long := "tls-" + strings.Repeat("x", 10000)
	_, _, err := parse(t, configOpts, mb("CONFIG", "SET", long, "1"))
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) || len(pe.Reply) > 300 || pe.Close {
		t.Errorf("a long guarded name: %v", err)
	}
}

func TestMergeConfigGet(t *testing.T) {
	ok := func(s string) codec.Reply { return codec.Reply{Raw: []byte(s), Kind: codec.ReplyOK} }
	// Each server lists its parameters in its own order; the merge keeps
	// the first server's order, then what only later servers have.
	a := ok("*6\r\n$4\r\nport\r\n$4\r\n7001\r\n$2\r\nhz\r\n$2\r\n10\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n")
	b := ok("*6\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$2\r\nhz\r\n$2\r\n10\r\n$4\r\nport\r\n$4\r\n7002\r\n")
	c := ok("*2\r\n$5\r\nextra\r\n$0\r\n\r\n")
	req := func(proto uint8, args ...string) *codec.Request {
		r, n, err := parse(t, configOpts, mb(append([]string{"CONFIG", "GET"}, args...)...))
		if err != nil {
			t.Fatal(describeRequest(r, n, err))
		}
		r.Proto = proto
		return r
	}
	tests := []struct {
		name    string
		proto   uint8
		replies []codec.Reply
		want    string
	}{
		{"agree but for port", 0, []codec.Reply{a, b},
			"*6\r\n$4\r\nport\r\n$4\r\n7001\r\n$2\r\nhz\r\n$2\r\n10\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"},
		{"one server has more", 0, []codec.Reply{a, c},
			"*8\r\n$4\r\nport\r\n$4\r\n7001\r\n$2\r\nhz\r\n$2\r\n10\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n$5\r\nextra\r\n$0\r\n\r\n"},
		{"nothing matched", 0, []codec.Reply{ok("*0\r\n"), ok("*0\r\n")}, "*0\r\n"},
		{"RESP3 maps", 3, []codec.Reply{
			ok("%2\r\n$2\r\nhz\r\n$2\r\n10\r\n$4\r\nport\r\n$4\r\n7001\r\n"),
			ok("%2\r\n$4\r\nport\r\n$4\r\n7002\r\n$2\r\nhz\r\n$2\r\n10\r\n"),
		}, "%2\r\n$2\r\nhz\r\n$2\r\n10\r\n$4\r\nport\r\n$4\r\n7001\r\n"},
		{"RESP3 nothing matched", 3, []codec.Reply{ok("%0\r\n"), ok("%0\r\n")}, "%0\r\n"},
		{"an error reply is passed on", 0, []codec.Reply{a, {Raw: []byte("-ERR nope\r\n"), Kind: codec.ReplyError}}, "-ERR nope\r\n"},
		{"a failed server is named", 0, []codec.Reply{a, {Err: errors.New("backend failure: connecting"), Server: "127.0.0.1:7002"}},
			"-ERR server 127.0.0.1:7002: backend failure: connecting\r\n"},
		{"odd array", 0, []codec.Reply{ok("*1\r\n$2\r\nhz\r\n")}, "-ERR the servers' replies to CONFIG GET disagree or are not what it answers\r\n"},
		{"short array", 0, []codec.Reply{ok("*4\r\n$2\r\nhz\r\n$2\r\n10\r\n")}, "-ERR the servers' replies to CONFIG GET disagree or are not what it answers\r\n"},
		{"a name that is no string", 0, []codec.Reply{ok("*2\r\n:1\r\n$2\r\n10\r\n")}, "-ERR the servers' replies to CONFIG GET disagree or are not what it answers\r\n"},
		{"not an array", 0, []codec.Reply{ok("+OK\r\n")}, "-ERR the servers' replies to CONFIG GET disagree or are not what it answers\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := string(dialect.Merge(nil, req(tc.proto, "*"), nil, nil, tc.replies))
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestMergeConfigSet: CONFIG SET, RESETSTAT and REWRITE answer +OK when
// every server did, else the first error in server order, and a failed
// server by name.
func TestMergeConfigSet(t *testing.T) {
	okr := codec.Reply{Raw: []byte("+OK\r\n"), Kind: codec.ReplyOK}
	bad := codec.Reply{Raw: []byte("-ERR CONFIG SET failed\r\n"), Kind: codec.ReplyError}
	other := codec.Reply{Raw: []byte("-ERR other\r\n"), Kind: codec.ReplyError}
	down := codec.Reply{Err: errors.New("backend failure: timeout"), Server: "s3"}
	for _, in := range [][]string{{"CONFIG", "SET", "hz", "10"}, {"CONFIG", "RESETSTAT"}, {"CONFIG", "REWRITE"}} {
		req, n, err := parse(t, configOpts, mb(in...))
		if err != nil {
			t.Fatal(describeRequest(req, n, err))
		}
		for _, tc := range []struct {
			replies []codec.Reply
			want    string
		}{
			{[]codec.Reply{okr, okr, okr}, "+OK\r\n"},
			{[]codec.Reply{okr, bad, other}, "-ERR CONFIG SET failed\r\n"},
			{[]codec.Reply{okr, other, down}, "-ERR server s3: backend failure: timeout\r\n"},
		} {
			if got := string(dialect.Merge(nil, req, nil, nil, tc.replies)); got != tc.want {
				t.Errorf("%q: got %q, want %q", in, got, tc.want)
			}
		}
	}
}

// FuzzMergeConfigGet: any two server replies merge without a panic into
// one whole reply.
func FuzzMergeConfigGet(f *testing.F) {
	f.Add([]byte("*2\r\n$2\r\nhz\r\n$2\r\n10\r\n"), []byte("*2\r\n$2\r\nhz\r\n$2\r\n11\r\n"), false)
	f.Add([]byte("%1\r\n$2\r\nhz\r\n$2\r\n10\r\n"), []byte("%1\r\n$1\r\na\r\n$0\r\n\r\n"), true)
	f.Add([]byte("*0\r\n"), []byte("-ERR x\r\n"), false)
	req, _, err := parse(f, configOpts, mb("CONFIG", "GET", "*"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, resp3 bool) {
		if nextValue(a) != len(a) || nextValue(b) != len(b) {
			return // a backend hands Merge whole replies only
		}
		r := *req
		if resp3 {
			r.Proto = proto3
		}
		out := dialect.Merge(nil, &r, nil, nil, []codec.Reply{{Raw: a}, {Raw: b}})
		if n := nextValue(out); n == 0 || n != len(out) {
			t.Fatalf("merged %q and %q into %q, not one whole reply", a, b, out)
		}
	})
}
