package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sentinelPool is a redis pool with sentinels before its servers; extra
// goes after the servers, so a key there is read after them.
func sentinelPool(extra string) string {
	return "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n" +
		"  servers:\n   - shard-a:1\n   - shard-b:2 b\n" +
		"  sentinels:\n   - 127.0.0.1:26379\n   - \"[::1]:26380\"\n" + extra
}

func TestSentinelPool(t *testing.T) {
	c := mustParse(t, sentinelPool("  sentinel_auth: pw\n  sentinel_auth_user: proxy\n"))
	p := c.Pools[0]
	if want := []string{"127.0.0.1:26379", "[::1]:26380"}; !reflect.DeepEqual(p.Sentinels, want) {
		t.Errorf("Sentinels = %q, want %q", p.Sentinels, want)
	}
	want := []Server{
		{Network: "sentinel", Master: "shard-a", Weight: 1, Name: "shard-a", Line: 5},
		{Network: "sentinel", Master: "shard-b", Weight: 2, Name: "b", Line: 6},
	}
	if !reflect.DeepEqual(p.Servers, want) {
		t.Errorf("Servers = %+v\nwant %+v", p.Servers, want)
	}
	if p.SentinelAuth != "pw" || p.SentinelAuthUser != "proxy" || p.Kind() != KindSharded {
		t.Errorf("auth %q %q, kind %s", p.SentinelAuth, p.SentinelAuthUser, p.Kind())
	}
	// Marshal writes it back as it was read.
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, string(text)).Pools[0]
	if back.Checksum() != p.Checksum() {
		t.Errorf("round trip changed the pool:\n%s", text)
	}
}

func TestSentinelErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	tests := []struct{ name, text, want string }{
		{"memcache pool", "alpha:\n  listen: 127.0.0.1:1\n  sentinels:\n   - h:1\n  servers:\n   - m:1\n",
			at + `3: pool "alpha": sentinels: is only valid for a redis pool (redis: true)`},
		{"address line", strings.Replace(sentinelPool(""), "shard-a:1", "127.0.0.1:6379:1", 1),
			at + `5: pool "alpha": servers: invalid master name "127.0.0.1:6379" in "127.0.0.1:6379:1"; want "master:weight [name]" (a Sentinel master name, its weight, an optional shard name)`},
		{"no weight", strings.Replace(sentinelPool(""), "shard-a:1", "shard-a", 1),
			at + `5: pool "alpha": servers: "shard-a" has no weight; want "master:weight [name]" (a Sentinel master name, its weight, an optional shard name)`},
		{"zero weight", strings.Replace(sentinelPool(""), "shard-a:1", "shard-a:0", 1),
			at + `5: pool "alpha": servers: invalid weight "0" in "shard-a:0"; want an integer > 0`},
		{"duplicate shard name", strings.Replace(sentinelPool(""), "shard-b:2 b", "other:2 shard-a", 1),
			at + `6: pool "alpha": servers: duplicate server name "shard-a" (first at line 5)`},
		{"bad sentinel", strings.Replace(sentinelPool(""), "127.0.0.1:26379", "127.0.0.1", 1),
			at + `8: pool "alpha": sentinels: "127.0.0.1" has no port; want "host:port"`},
		{"duplicate sentinel", strings.Replace(sentinelPool(""), "\"[::1]:26380\"", "127.0.0.1:26379", 1),
			at + `9: pool "alpha": sentinels: duplicate sentinel "127.0.0.1:26379"`},
		{"empty sentinels", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  sentinels:\n  servers:\n   - m:1\n",
			at + `4: pool "alpha": sentinels: must be a non-empty list of "host:port" Sentinel addresses`},
		{"ejection", sentinelPool("  auto_eject_hosts: true\n"),
			at + `10: pool "alpha": auto_eject_hosts: does not apply to a pool with sentinels: a shard's keys never move, Sentinel promotes a replica and the proxy follows`},
		{"auth without sentinels", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  sentinel_auth: x\n  servers:\n   - 127.0.0.1:1:1\n",
			at + `4: pool "alpha": sentinel_auth: needs sentinels`},
		{"user without auth", sentinelPool("  sentinel_auth_user: u\n"),
			at + `10: pool "alpha": sentinel_auth_user: needs sentinel_auth, the user's password`},
		{"cluster", "alpha:\n  listen: 127.0.0.1:1\n  redis: true\n  redis_cluster: true\n  sentinels:\n   - h:1\n  servers:\n   - m:1\n",
			at + `5: pool "alpha": sentinels: is only valid for a sharded redis pool (servers, no redis_cluster, no lua)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if got := e.Error(); got != tt.want {
				t.Errorf("first error\n got %s\nwant %s\n(all: %v)", got, tt.want, err)
			}
		})
	}
}
