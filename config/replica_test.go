package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// replicaPool is a sharded redis pool of two shards, one named and one
// not, with extra after its servers.
func replicaPool(extra string) string {
	return "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n" +
		"  servers:\n   - 127.0.0.1:6379:1 one\n   - 127.0.0.1:6380:2\n" + extra
}

func TestReplicas(t *testing.T) {
	c := mustParse(t, replicaPool("  read_from: prefer_replica\n  replicas:\n"+
		"   - 127.0.0.1:7379 one\n   - 127.0.0.1:7479:3 one\n   - \"[::1]:7380 127.0.0.1:6380\"\n"+
		"   - /tmp/r.sock:2 127.0.0.1:6380:2\n   - /tmp/s.sock 127.0.0.1:6380\n"))
	p := c.Pools[0]
	want := []Replica{
		{Network: "tcp", Addr: "127.0.0.1:7379", Host: "127.0.0.1", Port: 7379, Weight: 1, Shard: "one", Line: 9},
		{Network: "tcp", Addr: "127.0.0.1:7479", Host: "127.0.0.1", Port: 7479, Weight: 3, Shard: "one", Line: 10},
		{Network: "tcp", Addr: "[::1]:7380", Host: "::1", Port: 7380, Weight: 1, Shard: "127.0.0.1:6380", Line: 11},
		{Network: "unix", Addr: "/tmp/r.sock", Host: "/tmp/r.sock", Weight: 2, Shard: "127.0.0.1:6380", Line: 12},
		{Network: "unix", Addr: "/tmp/s.sock", Host: "/tmp/s.sock", Weight: 1, Shard: "127.0.0.1:6380", Line: 13},
	}
	if !reflect.DeepEqual(p.Replicas, want) {
		t.Errorf("Replicas =\n%+v\nwant\n%+v", p.Replicas, want)
	}
	if p.ReadFrom != ReadFromPreferReplica {
		t.Errorf("ReadFrom = %q", p.ReadFrom)
	}
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), "read_from: prefer_replica") || !strings.Contains(string(text), "127.0.0.1:7479:3 one") {
		t.Errorf("marshaled:\n%s", text)
	}
	if back := mustParse(t, string(text)).Pools[0]; back.Checksum() != p.Checksum() {
		t.Errorf("round trip changed the pool:\n%s", text)
	}
	// Without the keys, a sharded redis pool reads from its masters and
	// marshals as before.
	plain := mustParse(t, replicaPool("")).Pools[0]
	if plain.ReadFrom != "" || plain.Replicas != nil {
		t.Errorf("plain pool: ReadFrom %q Replicas %v", plain.ReadFrom, plain.Replicas)
	}
}

func TestReplicaErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	forms := `want "host:port[:weight] shard" or "/path/to/socket[:weight] shard" (shard: a servers line's name or address)`
	tests := []struct{ name, text, want string }{
		{"memcache pool", pool("  replicas:\n   - 127.0.0.1:7000 127.0.0.1\n"),
			at + `3: pool "alpha": replicas: is only valid for a redis pool (redis: true)`},
		{"memcache read_from", pool("  read_from: master\n"),
			at + `3: pool "alpha": read_from: is only valid for a redis pool (redis: true)`},
		{"no shard", replicaPool("  replicas:\n   - 127.0.0.1:7000\n"),
			at + `8: pool "alpha": replicas: "127.0.0.1:7000" names no shard; ` + forms},
		{"a word between address and shard", replicaPool("  replicas:\n   - 127.0.0.1:7000:2 extra one\n"),
			at + `8: pool "alpha": replicas: "127.0.0.1:7000:2 extra one" has more than an address and a shard; ` + forms},
		{"unknown shard", replicaPool("  replicas:\n   - 127.0.0.1:7000 two\n"),
			at + `8: pool "alpha": replicas: replica 127.0.0.1:7000 names no shard "two"; want a servers line's name or address`},
		{"weight of another line", replicaPool("  replicas:\n   - 127.0.0.1:7000 127.0.0.1:6380:1\n"),
			at + `8: pool "alpha": replicas: replica 127.0.0.1:7000 names no shard "127.0.0.1:6380:1"; want a servers line's name or address`},
		{"bad port", replicaPool("  replicas:\n   - 127.0.0.1:x one\n"),
			at + `8: pool "alpha": replicas: invalid port "x" in "127.0.0.1:x:1"; want 1 to 65535`},
		{"zero weight", replicaPool("  replicas:\n   - 127.0.0.1:7000:0 one\n"),
			at + `8: pool "alpha": replicas: zero weight in "127.0.0.1:7000:0"; want an integer > 0`},
		{"duplicate", replicaPool("  replicas:\n   - 127.0.0.1:7000 one\n   - 127.0.0.1:7000:2 127.0.0.1:6380\n"),
			at + `9: pool "alpha": replicas: duplicate replica 127.0.0.1:7000 (first at line 8)`},
		{"a server", replicaPool("  replicas:\n   - 127.0.0.1:6380 one\n"),
			at + `8: pool "alpha": replicas: replica 127.0.0.1:6380 is one of the pool's servers`},
		{"not a list", replicaPool("  replicas: 127.0.0.1:7000 one\n"),
			at + `7: pool "alpha": replicas: must be a non-empty list of "host:port[:weight] shard" lines`},
		{"a mapping item", replicaPool("  replicas:\n   - a: b\n"),
			at + `8: pool "alpha": replicas: a replica must be one "host:port[:weight] shard" line, not a mapping`},
		{"read_from without replicas", replicaPool("  read_from: prefer_replica\n"),
			at + `7: pool "alpha": read_from: needs replicas (or sentinels, which name them) to read from`},
		{"lua", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  replicas:\n   - 127.0.0.1:7000 a\n",
			at + `4: pool "alpha": replicas: is only valid for a sharded redis pool or a redis_cluster pool; a route file picks its own backends`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if got := strings.Split(err.Error(), "\n")[0]; got != tt.want {
				t.Errorf("first error\n got %s\nwant %s\n(all: %v)", got, tt.want, err)
			}
		})
	}
}

// A pool with sentinels may set read_from without listing replicas, and
// may list a shard's replicas by its shard name.
func TestReplicasWithSentinels(t *testing.T) {
	p := mustParse(t, sentinelPool("  read_from: replica\n  replicas:\n   - 127.0.0.1:7000 b\n")).Pools[0]
	if p.ReadFrom != ReadFromReplica || len(p.Replicas) != 1 || p.Replicas[0].Shard != "b" {
		t.Fatalf("ReadFrom %q Replicas %+v", p.ReadFrom, p.Replicas)
	}
	mustParse(t, sentinelPool("  read_from: prefer_replica\n"))
}

// FuzzParseReplica: no panic, and a line that parses writes back as a
// line that parses to the same replica.
func FuzzParseReplica(f *testing.F) {
	for _, s := range []string{"127.0.0.1:7000 one", "127.0.0.1:7000:3 a:1", "[::1]:7000 x", "[::1]:7000:2 x",
		"/tmp/s:2 x", "/tmp/s x", "::1:7000:1 x", "h: x", " x", ":", "[", "[]:1 x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, msg := parseReplica(s)
		if msg != "" {
			return
		}
		back, msg := parseReplica(r.text())
		if msg != "" {
			t.Fatalf("%q -> %q: %s", s, r.text(), msg)
		}
		if back != r {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, r, r.text(), back)
		}
	})
}
