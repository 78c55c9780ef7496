package proxy_test

import (
	"slices"
	"strings"
	"testing"
)

// settingsNames returns the names of the "stats settings" lines, in order,
// and their values.
func settingsNames(t *testing.T, c *client) ([]string, map[string]string) {
	t.Helper()
	c.send("stats settings\r\n")
	var names []string
	values := map[string]string{}
	for {
		l := c.line()
		if l == "END" {
			return names, values
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(l, "STAT "), " ")
		if !ok || !strings.HasPrefix(l, "STAT ") {
			t.Fatalf("stats settings: line %q", l)
		}
		names = append(names, name)
		values[name] = value
	}
}

// TestStatsSettingsByKind checks the lines a pool's kind adds to "stats
// settings": after "kind" and before "default_version", a sharded pool
// shows how it places keys and what its servers speak, a Lua pool its
// route file and none of those.
func TestStatsSettingsByKind(t *testing.T) {
	servers, yaml := memcachedPool(t, 2, "")
	_, addr := startProxy(t, yaml, "mc")
	c := dial(t, addr)
	if r := c.do("set k 0 0 1\r\nv\r\n"); r != "STORED\r\n" {
		t.Fatalf("set: %q", r)
	}
	names, v := settingsNames(t, c)
	i := slices.Index(names, "kind")
	want := []string{"kind", "hash", "distribution", "server_protocol", "server_protocol_uses", "servers", "default_version"}
	if i < 0 || len(names) < i+len(want) || !slices.Equal(names[i:i+len(want)], want) {
		t.Fatalf("sharded pool: settings %v, want %v in a row", names, want)
	}
	if v["kind"] != "sharded" || v["server_protocol"] != "auto" || v["servers"] != "2" || v["lua"] != "" {
		t.Errorf("sharded pool: settings %v", v)
	}
	if u := v["server_protocol_uses"]; !strings.HasSuffix(u, "/2") {
		t.Errorf("sharded pool: server_protocol_uses %q, want one of 2 servers", u)
	}

	file := luaFile(t, servers[0])
	_, laddr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  lua: "+file+"\n", "lp")
	names, v = settingsNames(t, dial(t, laddr))
	i = slices.Index(names, "kind")
	want = []string{"kind", "lua", "default_version"}
	if i < 0 || len(names) < i+len(want) || !slices.Equal(names[i:i+len(want)], want) {
		t.Fatalf("Lua pool: settings %v, want %v in a row", names, want)
	}
	if v["kind"] != "lua" || v["lua"] != file {
		t.Errorf("Lua pool: settings %v", v)
	}
}
