package proxy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"shardproxy/internal/testserver"
)

// libraryNames lists the libraries of the server at addr, sorted, asked
// of the server directly.
func libraryNames(t *testing.T, addr string) string {
	t.Helper()
	got := respDial(t, addr).do("FUNCTION", "LIST")
	var names []string
	for _, m := range regexp.MustCompile(`library_name\r\n\$\d+\r\n([^\r]*)\r\n`).FindAllStringSubmatch(got, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// payloadOf is the string of a bulk reply.
func payloadOf(t *testing.T, reply string) string {
	t.Helper()
	head, rest, ok := strings.Cut(reply, "\r\n")
	var n int
	if _, err := fmt.Sscanf(head, "$%d", &n); !ok || err != nil || len(rest) != n+2 {
		t.Fatalf("not a bulk string: %q", reply)
	}
	return rest[:n]
}

// TestFunctionDumpRestore runs FUNCTION DUMP and FUNCTION RESTORE through
// a pool of two redis-servers: a dump of the libraries every server has
// (each server dumps them in its own order), restored to every server with
// each policy; a bad payload and Redis's own argument errors read as from
// redis-server and change nothing; a library one server has alone makes
// DUMP's error name that server, and a RESTORE it refuses leaves the other
// server restored until a RESTORE with FLUSH makes them the same.
func TestFunctionDumpRestore(t *testing.T) {
	servers, yaml := redisPool(t, 2, "")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	var all []string
	for i := range 8 {
		name := fmt.Sprintf("lib%d", i)
		all = append(all, name)
		code := fmt.Sprintf("#!lua name=%s\nredis.register_function('f%d', function() return %d end)", name, i, i)
		if got := c.do("FUNCTION", "LOAD", code); got != bulk(name) {
			t.Fatalf("FUNCTION LOAD %s: %q", name, got)
		}
	}
	want := strings.Join(all, " ")
	check := func(step, want string) {
		t.Helper()
		for _, s := range servers {
			if got := libraryNames(t, s.Addr); got != want {
				t.Fatalf("%s: server %s has libraries %q, want %q", step, s.Addr, got, want)
			}
		}
	}
	payload := payloadOf(t, c.do("FUNCTION", "DUMP"))
	if a, b := respDial(t, servers[0].Addr).do("FUNCTION", "DUMP"), respDial(t, servers[1].Addr).do("FUNCTION", "DUMP"); a != b {
		t.Logf("the servers dump the same libraries in different orders")
	}

	steps := []struct {
		name string
		args []string
		want string // the reply
		libs string // every server's libraries after it
	}{
		{"flush", []string{"FUNCTION", "FLUSH"}, "+OK\r\n", ""},
		{"restore", []string{"FUNCTION", "RESTORE", payload}, "+OK\r\n", want},
		{"append again", []string{"FUNCTION", "RESTORE", payload, "APPEND"}, "-ERR Library lib", want},
		{"replace", []string{"FUNCTION", "RESTORE", payload, "REPLACE"}, "+OK\r\n", want},
		{"load another", []string{"FUNCTION", "LOAD", "#!lua name=other\nredis.register_function('o', function() return 0 end)"}, bulk("other"), want + " other"},
		{"restore flush", []string{"FUNCTION", "RESTORE", payload, "FLUSH"}, "+OK\r\n", want},
		{"bad payload", []string{"FUNCTION", "RESTORE", "bad_payload"}, "-ERR DUMP payload version or checksum are wrong\r\n", want},
		{"bad policy", []string{"FUNCTION", "RESTORE", payload, "MERGE"}, "-ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.\r\n", want},
		{"too many arguments", []string{"FUNCTION", "RESTORE", "arg1", "args2", "arg3"},
			"-ERR unknown subcommand or wrong number of arguments for 'RESTORE'. Try FUNCTION HELP.\r\n", want},
		{"too few arguments", []string{"FUNCTION", "RESTORE"}, "-ERR wrong number of arguments for 'function|restore' command\r\n", want},
	}
	for _, s := range steps {
		if got := c.do(s.args...); !strings.HasPrefix(got, s.want) {
			t.Fatalf("%s: %q, want %q", s.name, got, s.want)
		}
		check(s.name, s.libs)
		if s.libs == want && c.do("FUNCTION", "DUMP")[0] != '$' {
			t.Fatalf("%s: FUNCTION DUMP fails", s.name)
		}
	}
	for i := range 8 {
		if got := c.do("FCALL", fmt.Sprintf("f%d", i), "0"); got != fmt.Sprintf(":%d\r\n", i) {
			t.Fatalf("FCALL f%d: %q", i, got)
		}
	}

	// A library loaded on one server directly.
	if _, err := testserver.RedisDo(servers[1].Addr, "FUNCTION", "LOAD", "#!lua name=stray\nredis.register_function('s', function() return 0 end)"); err != nil {
		t.Fatal(err)
	}
	// The pool's first server is either (servers are in order of name).
	differ := "-ERR the servers' libraries differ: those of %s are not those of %s; FUNCTION RESTORE with FLUSH through the proxy makes them the same\r\n"
	a, b := servers[0].Addr, servers[1].Addr
	if got := c.do("FUNCTION", "DUMP"); got != fmt.Sprintf(differ, a, b) && got != fmt.Sprintf(differ, b, a) {
		t.Fatalf("FUNCTION DUMP with a library on one server: %q, want %q", got, fmt.Sprintf(differ, b, a))
	}
	// A restore that one server refuses: the other has restored.
	if got := c.do("FUNCTION", "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("FUNCTION FLUSH: %q", got)
	}
	if _, err := testserver.RedisDo(servers[1].Addr, "FUNCTION", "LOAD", "#!lua name=lib3\nredis.register_function('s', function() return 0 end)"); err != nil {
		t.Fatal(err)
	}
	if got := c.do("FUNCTION", "RESTORE", payload); got != "-ERR Library lib3 already exists\r\n" {
		t.Fatalf("FUNCTION RESTORE one server refuses: %q", got)
	}
	if got := libraryNames(t, servers[0].Addr); got != want {
		t.Fatalf("the server that took the restore: %q", got)
	}
	if got := c.do("FUNCTION", "DUMP"); !strings.HasPrefix(got, "-ERR the servers' libraries differ: ") {
		t.Fatalf("FUNCTION DUMP after a partial restore: %q", got)
	}
	if got := c.do("FUNCTION", "RESTORE", payload, "FLUSH"); got != "+OK\r\n" {
		t.Fatalf("FUNCTION RESTORE FLUSH to mend: %q", got)
	}
	check("mended", want)
}
