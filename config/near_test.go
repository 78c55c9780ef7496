package config

import (
	"strings"
	"testing"
	"time"
)

func TestNearCache(t *testing.T) {
	for _, tt := range []struct {
		name, extra string
		size        int
		ttl         time.Duration
		fill        string
	}{
		{"off", "", 0, 0, ""},
		{"off explicitly", "  near_cache: 0\n", 0, 0, ""},
		{"defaults", "  near_cache: 16\n", 16, DefaultNearCacheTTL, NearCacheFillGet},
		{"ttl", "  near_cache: 1\n  near_cache_ttl: 30\n", 1, 30 * time.Second, NearCacheFillGet},
		{"fill both", "  near_cache: 1\n  near_cache_fill: gets get\n", 1, DefaultNearCacheTTL, NearCacheFillGetGets},
		{"fill a list", "  near_cache: 1\n  near_cache_fill:\n    - get\n    - gets\n", 1, DefaultNearCacheTTL, NearCacheFillGetGets},
		{"fill gets", "  near_cache: 1\n  near_cache_fill: gets\n", 1, DefaultNearCacheTTL, NearCacheFillGets},
		{"with meta", "  near_cache: 1\n  server_protocol: meta\n", 1, DefaultNearCacheTTL, NearCacheFillGet},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, pool(tt.extra))
			p := c.Pools[0]
			if p.NearCache != tt.size || p.NearCacheTTL != tt.ttl || p.NearCacheFill != tt.fill {
				t.Fatalf("got %d MiB, %v, %q; want %d, %v, %q", p.NearCache, p.NearCacheTTL, p.NearCacheFill,
					tt.size, tt.ttl, tt.fill)
			}
			text, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if again := mustParse(t, string(text)); again.Pools[0].Checksum() != p.Checksum() {
				t.Errorf("round trip changed the pool:\n%s", text)
			}
		})
	}
	// Each setting changes the checksum: a reload must notice it.
	seen := map[string]string{}
	for _, extra := range []string{"", "  near_cache: 1\n", "  near_cache: 2\n",
		"  near_cache: 1\n  near_cache_ttl: 6\n", "  near_cache: 1\n  near_cache_fill: get gets\n"} {
		sum := mustParse(t, pool(extra)).Pools[0].Checksum()
		if other, dup := seen[sum]; dup {
			t.Errorf("%q and %q have the same checksum", extra, other)
		}
		seen[sum] = extra
	}
}

func TestNearCacheErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	luaPool := "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  near_cache: 8\n"
	for _, tt := range []struct{ name, text, want string }{
		{"redis", pool("  redis: true\n  near_cache: 8\n"),
			at + `4: pool "alpha": near_cache: is only valid for a memcache pool`},
		{"cluster", clusterPool("  near_cache: 8\n"),
			at + `5: pool "alpha": near_cache: is only valid for a native memcache pool`},
		{"lua", luaPool,
			at + `4: pool "alpha": near_cache: is only valid for a native memcache pool (servers, no lua); a route file answers from the proxy's cache with mcp.internal`},
		{"too big", pool("  near_cache: 65537\n"),
			at + `3: pool "alpha": near_cache: 65537 is out of range [0, 65536]`},
		{"negative", pool("  near_cache: -1\n"),
			at + `3: pool "alpha": near_cache: "-1" is not a number`},
		{"ttl zero", pool("  near_cache: 1\n  near_cache_ttl: 0\n"),
			at + `4: pool "alpha": near_cache_ttl: 0 is out of range [1, 3600]`},
		{"ttl without cache", pool("  near_cache_ttl: 5\n"),
			at + `3: pool "alpha": near_cache_ttl: needs near_cache (the cache's size in MiB)`},
		{"fill without cache", pool("  near_cache: 0\n  near_cache_fill: get\n"),
			at + `4: pool "alpha": near_cache_fill: needs near_cache (the cache's size in MiB)`},
		{"fill unknown", pool("  near_cache: 1\n  near_cache_fill: get gat\n"),
			at + `4: pool "alpha": near_cache_fill: unknown command "gat"; want get, gets or both`},
		{"fill empty", pool("  near_cache: 1\n  near_cache_fill: \"\"\n"),
			at + `4: pool "alpha": near_cache_fill: is empty; want get, gets or both`},
		{"fill a map", pool("  near_cache: 1\n  near_cache_fill:\n    get: 1\n"),
			at + `5: pool "alpha": near_cache_fill: must be get, gets or "get gets", not a mapping`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			if got := strings.Split(err.Error(), "\n")[0]; got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestNearCacheHotNeedsHotKeys: near_cache_hot without hot_keys is
// refused, naming the key.
func TestNearCacheHotNeedsHotKeys(t *testing.T) {
	_, err := Parse([]byte("mc:\n  listen: 127.0.0.1:22120\n  near_cache: 1\n  near_cache_hot: true\n  servers:\n    - 127.0.0.1:11211:1\n"), "x.yml")
	if err == nil || !strings.Contains(err.Error(), `x.yml:4: pool "mc": near_cache_hot: needs hot_keys`) {
		t.Fatalf("near_cache_hot without hot_keys: %v", err)
	}
	if _, err := Parse([]byte("mc:\n  listen: 127.0.0.1:22120\n  near_cache: 1\n  near_cache_hot: true\n  hot_keys: 3\n  servers:\n    - 127.0.0.1:11211:1\n"), "x.yml"); err != nil {
		t.Fatalf("near_cache_hot with hot_keys: %v", err)
	}
}
