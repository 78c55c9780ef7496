package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// clusterPool is a redis_cluster pool "alpha" with extra keys.
func clusterPool(extra string) string {
	return "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n  redis_cluster: true\n" + extra +
		"  servers:\n   - 127.0.0.1:7000:1\n   - 127.0.0.1:7001:1\n"
}

func TestClusterPool(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		readFrom string
		refresh  time.Duration
	}{
		{"defaults", clusterPool(""), ReadFromMaster, DefaultClusterRefresh},
		{"master", clusterPool("  read_from: master\n"), ReadFromMaster, DefaultClusterRefresh},
		{"prefer_replica", clusterPool("  read_from: prefer_replica\n"), ReadFromPreferReplica, DefaultClusterRefresh},
		{"replica and refresh", clusterPool("  read_from: replica\n  cluster_refresh: 250\n"), ReadFromReplica, 250 * time.Millisecond},
		{"auth, timeouts, connections", clusterPool("  redis_auth: pw\n  timeout: 300\n  server_connections: 4\n  redis_db: 0\n  auto_eject_hosts: false\n"),
			ReadFromMaster, DefaultClusterRefresh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustParse(t, tt.text).Pools[0]
			if !p.RedisCluster || p.ReadFrom != tt.readFrom || p.ClusterRefresh != tt.refresh {
				t.Fatalf("RedisCluster %v ReadFrom %q ClusterRefresh %v", p.RedisCluster, p.ReadFrom, p.ClusterRefresh)
			}
			if len(p.Servers) != 2 || p.Servers[0].Addr != "127.0.0.1:7000" {
				t.Fatalf("servers %+v", p.Servers)
			}
		})
	}
	p := mustParse(t, pool("  redis: true\n")).Pools[0]
	if p.RedisCluster || p.ReadFrom != "" || p.ClusterRefresh != 0 {
		t.Fatalf("a plain redis pool: RedisCluster %v ReadFrom %q ClusterRefresh %v", p.RedisCluster, p.ReadFrom, p.ClusterRefresh)
	}
}

func TestClusterPoolErrors(t *testing.T) {
	const refused = "does not apply to a redis_cluster pool: a key goes to the node serving its slot " +
		"(CRC16 of the key or of its {hash tag}), as the cluster's slot map says"
	tests := []struct {
		name string
		text string
		want string
	}{
		{"memcached cluster", "alpha:\n  listen: 127.0.0.1:22121\n  redis_cluster: true\n  servers:\n   - 127.0.0.1:7000:1\n",
			`config: testdata/x.yml:3: pool "alpha": redis_cluster: needs redis: true`},
		{"hash", clusterPool("  hash: fnv1a_64\n"), `config: testdata/x.yml:5: pool "alpha": hash: ` + refused},
		{"hash_tag", clusterPool("  hash_tag: \"{}\"\n"), `config: testdata/x.yml:5: pool "alpha": hash_tag: ` + refused},
		{"distribution", clusterPool("  distribution: ketama\n"), `config: testdata/x.yml:5: pool "alpha": distribution: ` + refused},
		{"hash_seed", clusterPool("  hash_seed: 1\n"), `config: testdata/x.yml:5: pool "alpha": hash_seed: ` + refused},
		{"auto_eject_hosts", clusterPool("  auto_eject_hosts: true\n"),
			`config: testdata/x.yml:5: pool "alpha": auto_eject_hosts: does not apply to a redis_cluster pool: the cluster fails over by itself`},
		{"redis_db", clusterPool("  redis_db: 2\n"), `config: testdata/x.yml:5: pool "alpha": redis_db: a Redis Cluster has database 0 only`},
		{"unix seed", "alpha:\n  listen: 127.0.0.1:22121\n  redis: true\n  redis_cluster: true\n  servers:\n   - /tmp/r.sock:1\n",
			`config: testdata/x.yml:6: pool "alpha": servers: "/tmp/r.sock:": a cluster seed must be host:port`},
		{"bad read_from", clusterPool("  read_from: slave\n"),
			`config: testdata/x.yml:5: pool "alpha": read_from: unknown value "slave"; want master, prefer_replica or replica`},
		{"cluster_refresh too small", clusterPool("  cluster_refresh: 10\n"),
			`config: testdata/x.yml:5: pool "alpha": cluster_refresh: 10 is out of range [100, 2147483647]`},
		{"read_from without replicas", pool("  redis: true\n  read_from: replica\n"),
			`config: testdata/x.yml:4: pool "alpha": read_from: needs replicas (or sentinels, which name them) to read from`},
		{"replicas on a cluster", clusterPool("  replicas:\n   - 127.0.0.1:7001 127.0.0.1:7000\n"),
			`config: testdata/x.yml:5: pool "alpha": replicas: does not apply to a redis_cluster pool: the slot map names each master's replicas`},
		{"cluster_refresh without cluster", pool("  cluster_refresh: 1000\n"),
			`config: testdata/x.yml:3: pool "alpha": cluster_refresh: is only valid for a redis_cluster pool (redis_cluster: true)`},
		{"failover to a cluster pool", pool("  redis: true\n  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: beta\n") +
			"beta:\n  listen: 127.0.0.1:22200\n  redis: true\n  redis_cluster: true\n  servers:\n   - 127.0.0.1:7000:1\n",
			`config: testdata/x.yml:6: pool "alpha": failover_pool: pool "beta" is a redis_cluster pool, which has no servers to pick from`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			var first *Error
			if !errors.As(err, &first) {
				t.Fatalf("error %v is no *Error", err)
			}
			if got := strings.Split(err.Error(), "\n")[0]; got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

// A cluster pool marshals without the keys it refuses and reads back the
// same.
func TestClusterPoolMarshal(t *testing.T) {
	c := mustParse(t, clusterPool("  read_from: replica\n  cluster_refresh: 750\n  redis_auth: pw\n"))
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// the keys a redis_cluster pool refuses (cluster/config.go)
	for _, key := range []string{"hash", "hash_tag", "distribution", "hash_seed"} {
		if strings.Contains(string(text), key+":") {
			t.Errorf("marshaled cluster pool has %s:\n%s", key, text)
		}
	}
	for _, want := range []string{"redis_cluster: true\n", "read_from: replica\n", "cluster_refresh: 750\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("marshaled text lacks %q:\n%s", want, text)
		}
	}
	again := mustParse(t, string(text))
	if again.Pools[0].Checksum() != c.Pools[0].Checksum() {
		t.Errorf("round trip changed the pool:\n%s", text)
	}
}
