package proxy_test

import (
	"testing"

	"shardproxy/config"
	"shardproxy/kind"
	_ "shardproxy/proxy"
)

// Every kind config names is registered once proxy is imported
// (kinds.go), as cmd/shardproxy imports it.
func TestEveryKindRegistered(t *testing.T) {
	for _, name := range []config.Kind{config.KindSharded, config.KindCluster, config.KindLua} {
		if _, ok := kind.Lookup(name); !ok {
			t.Errorf("kind %q is not registered", name)
		}
	}
}
