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

// Every kind's config rules are registered once proxy is imported: a
// configuration with a pool of each kind parses, each pool of its kind.
func TestEveryKindParses(t *testing.T) {
	const text = "cluster:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  servers:\n   - 127.0.0.1:7000:1\n" +
		"lua:\n  listen: 127.0.0.1:0\n  lua: route.lua\n" +
		"sharded:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:11211:1\n"
	c, err := config.Parse([]byte(text), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Pools {
		if want := map[string]config.Kind{"cluster": config.KindCluster, "lua": config.KindLua, "sharded": config.KindSharded}[p.Name]; p.Kind() != want {
			t.Errorf("pool %s is of kind %s, want %s", p.Name, p.Kind(), want)
		}
	}
}
