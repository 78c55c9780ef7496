package proxy_test

import (
	"strings"
	"testing"

	"shardproxy/internal/testserver"
)

// TestLuaTooLargeDropsOldValue checks that a Lua pool answers a storage
// request over item_size_max as memcached's proxy does (observed on
// memcached 1.6.45 with a V2 route to a 1.6.18 server, which gets the
// request): "SERVER_ERROR object too large for cache" whatever noreply or
// q say, and for set and ms the key's old value gone from its server
// before the client reads the error; add, append and cas keep it.
func TestLuaTooLargeDropsOldValue(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	routes := map[string]string{
		"V1 direct": luaFile(t, mc),
		"V1 in Lua": luaFileWith(t, luaRoute, mc),
		"V2":        v2DirectRoute(t, mc),
	}
	big := strings.Repeat("x", 5000)
	const tooLarge = "SERVER_ERROR object too large for cache\r\n"
	tests := []struct {
		name, key, req string
		dropped        bool
	}{
		{"set", "k1", "set k1 0 0 5000\r\n", true},
		{"set noreply", "k2", "set k2 0 0 5000 noreply\r\n", true},
		{"ms", "k3", "ms k3 5000 T0\r\n", true},
		{"ms quiet", "k4", "ms k4 5000 q\r\n", true},
		{"ms base64 key", "k5", "ms azU= 5000 b\r\n", true},
		{"add keeps it", "k7", "add k7 0 0 5000\r\n", false},
		{"append keeps it", "k8", "append k8 0 0 5000\r\n", false},
		{"cas keeps it", "k9", "cas k9 0 0 5000 1\r\n", false},
	}
	for name, file := range routes {
		t.Run(name, func(t *testing.T) {
			_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  item_size_max: 4096\n  lua: "+file+"\n", "lp")
			c := dial(t, addr)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if r := c.do("set " + tt.key + " 0 0 3\r\nold\r\n"); r != "STORED\r\n" {
						t.Fatalf("set: %q", r)
					}
					c.send(tt.req + big + "\r\nmn\r\n")
					if got := c.line() + "\r\n"; got != tooLarge {
						t.Errorf("reply %q, want %q", got, tooLarge)
					}
					if l := c.line(); l != "MN" {
						t.Fatalf("then %q, want MN", l)
					}
					// No waiting: the server heard of it before the client did.
					v, ok := direct(t, mc.Addr, tt.key)
					if ok == tt.dropped {
						t.Errorf("on the server after the error: %q (present %v), want dropped %v", v, ok, tt.dropped)
					}
				})
			}
		})
	}
}
