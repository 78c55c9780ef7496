package resp

import (
	"strconv"
	"strings"
	"testing"

	"shardproxy/codec"
)

// TestKeyspaceRoutes: with Keyspace the commands that span every server
// go to every server; without it they are refused, naming the command.
func TestKeyspaceRoutes(t *testing.T) {
	for _, in := range [][]string{
		{"KEYS", "*"}, {"DBSIZE"}, {"RANDOMKEY"}, {"FLUSHALL"}, {"FLUSHALL", "ASYNC"},
		{"FUNCTION", "LOAD", "#!lua name=x\nreturn"}, {"FUNCTION", "DELETE", "x"},
		{"FUNCTION", "FLUSH", "SYNC"}, {"FUNCTION", "LIST", "WITHCODE"},
		{"FUNCTION", "DUMP"}, {"FUNCTION", "RESTORE", "payload", "REPLACE"},
	} {
		req, n, err := parse(t, keyspaceOpts, mb(in...))
		if err != nil || req.Route != codec.RouteAll || len(req.Keys) != 0 {
			t.Errorf("%q with Keyspace: %s", in, describeRequest(req, n, err))
		}
		name := strings.ToUpper(in[0])
		if in[0] == "FUNCTION" {
			name += " " + in[1]
		}
		req, n, err = parse(t, codec.Options{}, mb(in...))
		want := `reject reply="-ERR ` + name + ` is not supported by shardproxy: it needs every server\r\n"`
		if got := describeRequest(req, n, err); !strings.HasPrefix(got, want) {
			t.Errorf("%q without Keyspace: %s", in, got)
		}
	}
}

// TestKillRoutes: SCRIPT KILL and FUNCTION KILL go to every server, and
// their answers merge: OK when one server killed a script, else the
// first that is not NOTBUSY, else NOTBUSY.
func TestKillRoutes(t *testing.T) {
	for _, in := range [][]string{{"SCRIPT", "KILL"}, {"FUNCTION", "KILL"}, {"FUNCTION", "STATS"}} {
		req, n, err := parse(t, codec.Options{}, mb(in...))
		if err != nil || req.Route != codec.RouteAll {
			t.Errorf("%q: %s", in, describeRequest(req, n, err))
		}
	}
	notBusy := codec.Reply{Kind: codec.ReplyError, Raw: []byte("-NOTBUSY No scripts in execution right now.\r\n")}
	ok := codec.Reply{Kind: codec.ReplyOK, Raw: []byte("+OK\r\n")}
	unkillable := codec.Reply{Kind: codec.ReplyError, Raw: []byte("-UNKILLABLE Sorry the script already executed write commands\r\n")}
	for _, tc := range []struct {
		replies []codec.Reply
		want    string
	}{
		{[]codec.Reply{notBusy, ok, notBusy}, "+OK\r\n"},
		{[]codec.Reply{notBusy, notBusy}, string(notBusy.Raw)},
		{[]codec.Reply{notBusy, unkillable}, string(unkillable.Raw)},
	} {
		req, _, _ := parse(t, codec.Options{}, mb("SCRIPT", "KILL"))
		if got := string(dialect.Merge(nil, req, nil, nil, tc.replies)); got != tc.want {
			t.Errorf("merge of %d replies: %q, want %q", len(tc.replies), got, tc.want)
		}
	}
}

// TestFlushDeny: flush_all: false (Deny "flush_all") refuses FLUSHDB and
// FLUSHALL; Deny "flushall" (no redis_flushall) refuses FLUSHALL alone.
func TestFlushDeny(t *testing.T) {
	tests := []struct {
		deny             []string
		flushdb, flushal bool // allowed
	}{
		{nil, true, true},
		{[]string{"flushall"}, true, false},
		{[]string{"flush_all"}, false, false},
		{[]string{"flush_all", "flushall"}, false, false},
	}
	for _, tc := range tests {
		o := codec.Options{Keyspace: true, Deny: tc.deny}
		for _, c := range []struct {
			cmd     string
			allowed bool
		}{{"FLUSHDB", tc.flushdb}, {"FLUSHALL", tc.flushal}} {
			req, n, err := parse(t, o, mb(c.cmd, "ASYNC"))
			got := describeRequest(req, n, err)
			refused := strings.Contains(got, c.cmd+" is disabled for this pool")
			if refused == c.allowed {
				t.Errorf("deny %q: %s: %s", tc.deny, c.cmd, got)
			}
		}
	}
}

func TestMergeKeyspace(t *testing.T) {
	ok := func(s string) codec.Reply { return codec.Reply{Raw: []byte(s), Kind: codec.ReplyOK} }
	lib := func(name string, fns ...string) string {
		s := "*6\r\n$12\r\nlibrary_name\r\n$" + strconv.Itoa(len(name)) + "\r\n" + name + "\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*" + strconv.Itoa(len(fns)) + "\r\n"
		for _, f := range fns {
			s += "*6\r\n$4\r\nname\r\n$" + strconv.Itoa(len(f)) + "\r\n" + f + "\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n"
		}
		return s
	}
	list := func(libs ...string) string { return "*" + strconv.Itoa(len(libs)) + "\r\n" + strings.Join(libs, "") }
	a, b := lib("libA", "fa1", "fa2"), lib("libB", "fb1")
	aSwapped := lib("libA", "fa2", "fa1")
	tests := []struct {
		name    string
		args    []string
		replies []codec.Reply
		want    string
	}{
		{"keys", []string{"KEYS", "*"},
			[]codec.Reply{ok("*1\r\n$1\r\na\r\n"), ok("*0\r\n"), ok("*2\r\n$1\r\nb\r\n$1\r\nc\r\n")},
			"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"},
		{"keys none", []string{"KEYS", "x"}, []codec.Reply{ok("*0\r\n"), ok("*0\r\n")}, "*0\r\n"},
		{"keys not an array", []string{"KEYS", "*"}, []codec.Reply{ok("*0\r\n"), ok(":1\r\n")},
			"-ERR the servers' replies to KEYS disagree or are not what it answers\r\n"},
		{"dbsize", []string{"DBSIZE"}, []codec.Reply{ok(":3\r\n"), ok(":0\r\n"), ok(":4\r\n")}, ":7\r\n"},
		{"randomkey all empty", []string{"RANDOMKEY"}, []codec.Reply{ok("$-1\r\n"), ok("$-1\r\n")}, "$-1\r\n"},
		{"randomkey one has", []string{"RANDOMKEY"}, []codec.Reply{ok("$-1\r\n"), ok("$1\r\nk\r\n"), ok("$-1\r\n")}, "$1\r\nk\r\n"},
		{"randomkey empty key", []string{"RANDOMKEY"}, []codec.Reply{ok("$0\r\n\r\n"), ok("$-1\r\n")}, "$0\r\n\r\n"},
		{"flushall", []string{"FLUSHALL"}, []codec.Reply{ok("+OK\r\n"), ok("+OK\r\n")}, "+OK\r\n"},
		{"function load", []string{"FUNCTION", "LOAD", "x"}, []codec.Reply{ok("$1\r\nx\r\n"), ok("$1\r\nx\r\n")}, "$1\r\nx\r\n"},
		{"function load one refuses", []string{"FUNCTION", "LOAD", "x"},
			[]codec.Reply{ok("$1\r\nx\r\n"), {Raw: []byte("-ERR Library 'x' already exists\r\n"), Kind: codec.ReplyError}},
			"-ERR Library 'x' already exists\r\n"},
		{"function list alike", []string{"FUNCTION", "LIST"},
			[]codec.Reply{ok(list(a, b)), ok(list(b, aSwapped))}, list(a, b)},
		{"function list none", []string{"FUNCTION", "LIST"}, []codec.Reply{ok("*0\r\n"), ok("*0\r\n")}, "*0\r\n"},
		{"function list differ", []string{"FUNCTION", "LIST"},
			[]codec.Reply{ok(list(a, b)), ok(list(a))},
			"-ERR the servers' replies to FUNCTION LIST disagree or are not what it answers\r\n"},
		{"function list other function", []string{"FUNCTION", "LIST"},
			[]codec.Reply{ok(list(a)), ok(list(lib("libA", "fa1", "fa3")))},
			"-ERR the servers' replies to FUNCTION LIST disagree or are not what it answers\r\n"},
		{"a server down", []string{"DBSIZE"},
			[]codec.Reply{ok(":3\r\n"), {Err: errTest("backend failure: connecting")}},
			"-ERR backend failure: connecting\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, n, err := parse(t, keyspaceOpts, mb(tc.args...))
			if err != nil {
				t.Fatal(describeRequest(req, n, err))
			}
			subs := make([]*codec.Request, len(tc.replies))
			for i := range subs {
				subs[i] = req
			}
			if got := string(dialect.Merge([]byte("x"), req, subs, nil, tc.replies)); got != "x"+tc.want {
				t.Fatalf("got %q, want %q", got, "x"+tc.want)
			}
		})
	}
}

// TestMergeRandomSpreads: RANDOMKEY picks among the servers that have a
// key, each of them sometimes.
func TestMergeRandomSpreads(t *testing.T) {
	req, _, _ := parse(t, keyspaceOpts, mb("RANDOMKEY"))
	replies := []codec.Reply{
		{Raw: []byte("$1\r\na\r\n")}, {Raw: []byte("$-1\r\n")}, {Raw: []byte("$1\r\nc\r\n")},
	}
	seen := map[string]int{}
	for range 200 {
		seen[string(dialect.Merge(nil, req, []*codec.Request{req, req, req}, nil, replies))]++
	}
	if len(seen) != 2 || seen["$1\r\na\r\n"] == 0 || seen["$1\r\nc\r\n"] == 0 {
		t.Fatalf("picks: %v", seen)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// TestDenyContainer: a denied container refuses each of its subcommands,
// a denied subcommand refuses itself alone, and names are matched in any
// case; the sessions of one deny list share one table.
func TestDenyContainer(t *testing.T) {
	o := codec.Options{Deny: []string{"Object", "client|id"}}
	for _, c := range []struct {
		args    []string
		refused string // the disabled name; "" allowed
	}{
		{[]string{"OBJECT", "ENCODING", "k"}, "OBJECT ENCODING"},
		{[]string{"OBJECT", "FREQ", "k"}, "OBJECT FREQ"},
		{[]string{"CLIENT", "ID"}, "CLIENT ID"},
		{[]string{"CLIENT", "GETNAME"}, ""},
		{[]string{"GET", "k"}, ""},
	} {
		req, n, err := parse(t, o, mb(c.args...))
		got := describeRequest(req, n, err)
		disabled := strings.Contains(got, "is disabled for this pool")
		if disabled != (c.refused != "") || c.refused != "" && !strings.Contains(strings.ToUpper(got), c.refused+" IS DISABLED") {
			t.Errorf("deny %q: %q: %s", o.Deny, c.args, got)
		}
	}
	if a, b := denyTable(o.Deny), denyTable(append([]string(nil), o.Deny...)); &a[0] != &b[0] {
		t.Error("two parsers of one deny list have tables of their own")
	}
	if denyTable([]string{"nosuchcommand"}) != nil {
		t.Error("a deny list that names no command has a table")
	}
}
