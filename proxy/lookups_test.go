package proxy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"shardproxy/internal/testserver"
)

// TestStatsLookups sends the same requests to a memcached and, through
// the proxy, to other memcached servers (server_protocol text and meta,
// and a Lua pool), and checks that the proxy's stats count cmd_get,
// cmd_set, get_hits and get_misses as the memcached counted them: keys
// looked up by get, gets and mg, hits among them, storage requests. A
// 100 KB value takes the big reply's way through the proxy. stats reset
// sets them to zero (memcached resets its own).
func TestStatsLookups(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	big := strings.Repeat("v", 100<<10)
	reqs := []string{
		"set a 0 0 1\r\nx\r\n",
		"set b 0 0 1 noreply\r\ny\r\n",
		"ms c 1\r\nz\r\n",
		"add a 0 0 1\r\nx\r\n",
		"set big 0 0 " + strconv.Itoa(len(big)) + "\r\n" + big + "\r\n",
		"get a\r\n",
		"get nope\r\n",
		"gets a b nope c\r\n",
		"mg a v\r\n",
		"mg nope v\r\n",
		"mg nope v q\r\nmn\r\n",
		"get big\r\n",
		"delete a\r\n",
		"get a\r\n",
	}
	names := []string{"cmd_get", "cmd_set", "get_hits", "get_misses"}
	run := func(t *testing.T, addr string) map[string]string {
		t.Helper()
		c := dial(t, addr)
		before := statsOf(t, c, "stats\r\n")
		for _, r := range reqs {
			c.send(r)
			if strings.Contains(r, "noreply") {
				continue
			}
			c.reply() // a quiet mg's miss shows only the MN
		}
		after := statsOf(t, c, "stats\r\n")
		got := map[string]string{}
		for _, n := range names {
			b, _ := strconv.Atoi(before[n])
			a, err := strconv.Atoi(after[n])
			if err != nil {
				t.Fatalf("%s: %q", n, after[n])
			}
			got[n] = strconv.Itoa(a - b)
		}
		c.do("stats reset\r\n")
		for n, v := range statsOf(t, c, "stats\r\n") {
			if slices.Contains(names, n) && v != "0" {
				t.Errorf("after stats reset %s = %s", n, v)
			}
		}
		return got
	}
	want := run(t, testserver.StartMemcached(t).Addr)
	t.Logf("memcached counted %v", want)
	for _, tc := range []struct{ name, yaml string }{
		{"text", "  server_protocol: text\n"},
		{"meta", "  server_protocol: meta\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, yaml := memcachedPool(t, 2, tc.yaml)
			_, addr := startProxy(t, yaml, "mc")
			if got := run(t, addr); !equalMaps(got, want) {
				t.Errorf("proxy counted %v, want %v", got, want)
			}
		})
	}
	t.Run("lua", func(t *testing.T) {
		mc := testserver.StartMemcached(t)
		_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+luaFile(t, mc)+"\n", "lp")
		if got := run(t, addr); !equalMaps(got, want) {
			t.Errorf("proxy counted %v, want %v", got, want)
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
