package config_test

import (
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/cluster"
	"shardproxy/config"
	"shardproxy/lua"
)

// The defaults config shares with the packages that apply them to a zero
// Config: config may not import them, so they are written twice and pinned
// here. An external test: cluster and lua import config (their pool
// kinds read a config.Pool).
func TestDefaultsMatchTheirPackages(t *testing.T) {
	for _, tt := range []struct {
		name           string
		config, theirs time.Duration
	}{
		{"backend.DefaultConnectTimeout", config.DefaultConnectTimeout, backend.DefaultConnectTimeout},
		{"backend.DefaultRetryTimeout", config.DefaultServerRetryTimeout, backend.DefaultRetryTimeout},
		{"backend.DefaultHealthTimeout", config.DefaultHealthCheckTimeout, backend.DefaultHealthTimeout},
		{"cluster.DefaultRefreshInterval", config.DefaultClusterRefresh, cluster.DefaultRefreshInterval},
		{"lua.DefaultMaxRun", config.DefaultLuaTimeout, lua.DefaultMaxRun},
	} {
		if tt.config != tt.theirs {
			t.Errorf("config has %v, %s is %v", tt.config, tt.name, tt.theirs)
		}
	}
	if config.DefaultLuaMaxAlloc<<20 != lua.DefaultMaxAlloc {
		t.Errorf("config has %d MiB, lua.DefaultMaxAlloc is %d bytes", config.DefaultLuaMaxAlloc, lua.DefaultMaxAlloc)
	}
}
