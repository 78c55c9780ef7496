package config

import (
	"testing"
)

// withKinds makes rules the only linked kinds for the test.
func withKinds(t *testing.T, rules ...KindRules) {
	t.Helper()
	saved := kinds
	kinds = new(kindRegistry)
	t.Cleanup(func() { kinds = saved })
	for _, r := range rules {
		kinds.register(r)
	}
}

// A pool whose kind no linked package registered is refused, with the
// pool and the kind named, and Parse returns no Config.
func TestParseUnlinkedKind(t *testing.T) {
	const text = "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - 127.0.0.1:11211:1\n" +
		"beta:\n  listen: 127.0.0.1:22122\n  redis: true\n  redis_cluster: true\n  servers:\n   - 127.0.0.1:7000:1\n"
	tests := []struct {
		name  string
		rules []KindRules
		want  string
	}{
		{"none", nil,
			`config: test.yml:1: pool "alpha": no package linked into this program checks or builds a pool of kind sharded ` +
				`(the proxy links every kind: proxy/kinds.go)` + "\n" +
				`config: test.yml:5: pool "beta": no package linked into this program checks or builds a pool of kind sharded ` +
				`(the proxy links every kind: proxy/kinds.go)`},
		{"cluster only", []KindRules{{Kind: KindCluster, Claims: func(p *Pool) bool { return p.RedisCluster }, Order: OrderCluster,
			Validate: func(*PoolCheck) {}}},
			`config: test.yml:1: pool "alpha": no package linked into this program checks or builds a pool of kind sharded ` +
				`(the proxy links every kind: proxy/kinds.go)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withKinds(t, tt.rules...)
			c, err := Parse([]byte(text), "test.yml")
			if err == nil || c != nil {
				t.Fatalf("Parse = %v, %v; want an error", c, err)
			}
			if err.Error() != tt.want {
				t.Errorf("got  %s\nwant %s", err, tt.want)
			}
		})
	}
}

// Pool.Kind asks the kinds that claim in their Order, then the default.
func TestKindOrder(t *testing.T) {
	noCheck := func(*PoolCheck) {}
	withKinds(t,
		KindRules{Kind: KindLua, Claims: func(p *Pool) bool { return p.Lua != "" }, Order: OrderLua, Validate: noCheck},
		KindRules{Kind: KindSharded, Validate: noCheck},
		KindRules{Kind: KindCluster, Claims: func(p *Pool) bool { return p.RedisCluster }, Order: OrderCluster, Validate: noCheck},
	)
	tests := []struct {
		pool Pool
		want Kind
	}{
		{Pool{}, KindSharded},
		{Pool{Lua: "route.lua"}, KindLua},
		{Pool{RedisCluster: true}, KindCluster},
		{Pool{RedisCluster: true, Lua: "route.lua"}, KindCluster},
	}
	for _, tt := range tests {
		if got := tt.pool.Kind(); got != tt.want {
			t.Errorf("%+v: Kind() = %s, want %s", tt.pool, got, tt.want)
		}
	}
}

// RegisterKind refuses rules that would make a pool's kind ambiguous.
func TestRegisterKindPanics(t *testing.T) {
	noCheck := func(*PoolCheck) {}
	claims := func(*Pool) bool { return false }
	tests := []struct {
		name  string
		rules []KindRules
	}{
		{"twice", []KindRules{{Kind: "a", Validate: noCheck}, {Kind: "a", Claims: claims, Validate: noCheck}}},
		{"two defaults", []KindRules{{Kind: "a", Validate: noCheck}, {Kind: "b", Validate: noCheck}}},
		{"same order", []KindRules{{Kind: "a", Claims: claims, Order: 1, Validate: noCheck},
			{Kind: "b", Claims: claims, Order: 1, Validate: noCheck}}},
		{"no validate", []KindRules{{Kind: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := new(kindRegistry)
			defer func() {
				if recover() == nil {
					t.Errorf("registering %d kinds did not panic", len(tt.rules))
				}
			}()
			for _, r := range tt.rules {
				g.register(r)
			}
		})
	}
}
