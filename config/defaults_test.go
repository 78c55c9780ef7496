package config

import (
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/lua"
)

// The defaults config shares with the packages that apply them to a zero
// Config: config may not import them, so they are written twice and pinned
// here.
func TestDefaultsMatchTheirPackages(t *testing.T) {
	for _, tt := range []struct {
		name           string
		config, theirs time.Duration
	}{
		{"backend.DefaultConnectTimeout", DefaultConnectTimeout, backend.DefaultConnectTimeout},
		{"backend.DefaultRetryTimeout", DefaultServerRetryTimeout, backend.DefaultRetryTimeout},
		{"backend.DefaultHealthTimeout", DefaultHealthCheckTimeout, backend.DefaultHealthTimeout},
		{"cluster.DefaultRefreshInterval", DefaultClusterRefresh, cluster.DefaultRefreshInterval},
		{"lua.DefaultMaxRun", DefaultLuaTimeout, lua.DefaultMaxRun},
	} {
		if tt.config != tt.theirs {
			t.Errorf("config has %v, %s is %v", tt.config, tt.name, tt.theirs)
		}
	}
	if DefaultLuaMaxAlloc<<20 != lua.DefaultMaxAlloc {
		t.Errorf("config has %d MiB, lua.DefaultMaxAlloc is %d bytes", DefaultLuaMaxAlloc, lua.DefaultMaxAlloc)
	}
}
