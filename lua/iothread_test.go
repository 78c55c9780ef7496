package lua_test

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/lua"
)

// countingServer is a testserver.Mock whose sockets the test counts.
func countingServer(t *testing.T) (port int, accepted *atomic.Int64) {
	t.Helper()
	m := testserver.NewMock(t, func(string) string { return "VERSION 1.6.45\r\n" })
	return int(netip.MustParseAddrPort(m.Addr).Port()), &m.Accepted
}

// TestPoolIOThread checks mcp.pool's iothread = false: memcached gives
// each worker thread sockets of its own to the pool's backends, so a
// backend gets its connections once per Lua state; with iothread true
// (or unset) the states share them.
func TestPoolIOThread(t *testing.T) {
	for _, tc := range []struct {
		opts string
		want int64
	}{
		{"", 2},
		{", { iothread = true }", 2},
		{", { iothread = false }", 2 * 3},
	} {
		port, accepted := countingServer(t)
		src := fmt.Sprintf(`function mcp_config_pools()
  return mcp.pool({ mcp.backend({ label = "b", host = "127.0.0.1", port = %d, connections = 2 }) }%s)
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return p(r) end)
end`, port, tc.opts)
		r, err := lua.New(lua.Config{Path: "routes.lua", Source: []byte(src), Dialect: memcacheDialect(t),
			Workers: 3, Preconnect: true, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for accepted.Load() < tc.want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // and no more
		if got := accepted.Load(); got != tc.want {
			t.Errorf("pool options %q: %d sockets, want %d", tc.opts, got, tc.want)
		}
		r.Close()
	}
}
