package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// withoutLines returns copies of the pools with every Line zeroed and
// without the record of the keys set, which Marshal does not keep (it writes
// the twemproxy keys always).
func withoutLines(pools []*Pool) []Pool {
	var out []Pool
	for _, p := range pools {
		q := *p
		q.Line = 0
		q.set = nil
		q.Servers = nil
		for _, s := range p.Servers {
			s.Line = 0
			q.Servers = append(q.Servers, s)
		}
		if p.ServersFrom != nil {
			sf := *p.ServersFrom
			sf.Line = 0
			q.ServersFrom = &sf
		}
		if p.DeleteSpool != nil {
			ds := *p.DeleteSpool
			ds.Line = 0
			q.DeleteSpool = &ds
		}
		if p.Replicas != nil {
			q.Replicas = []Replica{}
			for _, r := range p.Replicas {
				r.Line = 0
				q.Replicas = append(q.Replicas, r)
			}
		}
		out = append(out, q)
	}
	return out
}

// roundTrip parses what Marshal writes of c, fails t unless its pools read
// back as c's (line numbers aside), and returns them and the text.
func roundTrip(t *testing.T, c *Config) (*Config, []byte) {
	t.Helper()
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(text, "marshaled")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if got, want := withoutLines(again.Pools), withoutLines(c.Pools); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the pools\n got %+v\nwant %+v\ntext:\n%s", got, want, text)
	}
	return again, text
}

// Every configuration in testdata/ and examples/ survives parse ->
// Marshal -> parse unchanged.
func TestMarshalRoundTrip(t *testing.T) {
	files, err := filepath.Glob("testdata/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	examples, err := filepath.Glob("../examples/*/*.yml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	files = append(files, examples...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := roundTrip(t, c)
			for i, p := range c.Pools {
				if again.Pools[i].Checksum() != p.Checksum() {
					t.Errorf("pool %s: checksum changed in the round trip", p.Name)
				}
			}
		})
	}
}

// A twemproxy file marshals without shardproxy keys, so twemproxy can read
// the result.
func TestMarshalTwemproxyKeysOnly(t *testing.T) {
	c, err := Load("testdata/nutcracker.yml")
	if err != nil {
		t.Fatal(err)
	}
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"item_size_max", "max_request_line", "flush_all", "connect_timeout", "hash_seed"} {
		if strings.Contains(string(text), key) {
			t.Errorf("marshaled twemproxy config has %s:\n%s", key, text)
		}
	}
	for _, want := range []string{"listen: /tmp/gamma 0666\n", "hash_tag: '{}'\n", "- 127.0.0.1:6380:1 server1\n", "redis_auth: s3cret pass\n"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("marshaled text lacks %q:\n%s", want, text)
		}
	}
}

// mutate returns a value of v's type different from v.
func mutate(t *testing.T, v reflect.Value) reflect.Value {
	t.Helper()
	n := reflect.New(v.Type()).Elem()
	n.Set(v)
	switch v.Kind() {
	case reflect.String:
		n.SetString(v.String() + "x")
	case reflect.Bool:
		n.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		n.SetInt(v.Int() + 1)
	case reflect.Uint32, reflect.Uint64:
		n.SetUint(v.Uint() + 1)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			t.Fatalf("mutate: no rule for %s", v.Type())
		}
		n = reflect.Append(reflect.MakeSlice(v.Type(), 0, v.Len()+1), reflect.ValueOf("x"))
	default:
		t.Fatalf("mutate: no rule for %s", v.Type())
	}
	return n
}

// Every field but Line takes part in the checksum, so a field added later
// cannot be forgotten there.
func TestChecksumCoversEveryField(t *testing.T) {
	c := mustParse(t, pool("  timeout: 400\n"))
	base := c.Pools[0]
	sum := base.Checksum()

	moved := *base
	moved.Line = 40
	moved.Servers = []Server{base.Servers[0]}
	moved.Servers[0].Line = 41
	if moved.Checksum() != sum {
		t.Error("checksum depends on line numbers")
	}

	pt := reflect.TypeFor[Pool]()
	for i := range pt.NumField() {
		f := pt.Field(i)
		if f.Name == "Line" || f.Name == "set" {
			// set is which keys the file wrote, not a value: Marshal writes
			// the twemproxy keys always, so a round trip would change it.
			continue
		}
		switch f.Type {
		case reflect.TypeFor[*Route]():
			routes := []*Route{nil, {Pool: "a"}, {Pool: "b"}, {Pool: "a", Failover: &RouteFailover{Pool: "b", On: FailoverOnError}},
				{Pool: "a", Failover: &RouteFailover{Pool: "b", On: FailoverOnErrorOrMiss}},
				{Pool: "a", Shadow: &Shadow{Pool: "b", Fraction: 1, Requests: ShadowAll, Queue: 1}},
				{Pool: "a", Shadow: &Shadow{Pool: "b", Fraction: 0.5, Requests: ShadowAll, Queue: 1}},
				{Migrate: &Migrate{From: "a", To: "b", Phase: PhaseWarm}}, {Migrate: &Migrate{From: "a", To: "b", Phase: PhaseToOnly}},
				{Migrate: &Migrate{From: "a", To: "b", Phase: PhaseWarm, At: []PhaseAt{{PhaseToOnly, time.Unix(1, 0)}}}},
				{Migrate: &Migrate{From: "a", To: "b", Phase: PhaseWarm, At: []PhaseAt{{PhaseToOnly, time.Unix(2, 0)}}}},
				{WarmUp: &WarmUp{Cold: "a", Warm: "b"}}, {WarmUp: &WarmUp{Cold: "b", Warm: "a"}}}
			seen := map[string]int{}
			for j, r := range routes {
				p := *base
				p.Route = r
				if k, dup := seen[p.Checksum()]; dup {
					t.Errorf("checksum: routes %d and %d read the same", k, j)
				}
				seen[p.Checksum()] = j
			}
		case reflect.TypeFor[Listen]():
			for j := range f.Type.NumField() {
				p := *base
				lv := reflect.ValueOf(&p.Listen).Elem().Field(j)
				lv.Set(mutate(t, lv))
				if p.Checksum() == sum {
					t.Errorf("checksum ignores Listen.%s", f.Type.Field(j).Name)
				}
			}
		case reflect.TypeFor[[]Server]():
			st := reflect.TypeFor[Server]()
			for j := range st.NumField() {
				if st.Field(j).Name == "Line" {
					continue
				}
				p := *base
				p.Servers = []Server{base.Servers[0]}
				sv := reflect.ValueOf(&p.Servers[0]).Elem().Field(j)
				sv.Set(mutate(t, sv))
				if p.Checksum() == sum {
					t.Errorf("checksum ignores Server.%s", st.Field(j).Name)
				}
			}
			p := *base
			p.Servers = append([]Server{base.Servers[0]}, base.Servers[0])
			if p.Checksum() == sum {
				t.Error("checksum ignores the number of servers")
			}
		case reflect.TypeFor[[]TaggedListen]():
			one := TaggedListen{Tag: "b", Listen: Listen{Network: "tcp", Addr: "127.0.0.1:2"}}
			for _, tl := range []TaggedListen{one, {Tag: "c", Listen: one.Listen}, {Tag: "b", Listen: Listen{Network: "tcp", Addr: "127.0.0.1:3"}}} {
				p := *base
				p.ListenTags = []TaggedListen{tl}
				if p.Checksum() == sum {
					t.Errorf("checksum ignores ListenTags %v", tl)
				}
			}
		case reflect.TypeFor[*DeleteSpool]():
			one := DeleteSpool{Path: "spool", MaxBytes: 1 << 20, Fsync: FsyncInterval, FsyncInterval: time.Second, Line: 3}
			withOne := *base
			withOne.DeleteSpool = &one
			if withOne.Checksum() == sum {
				t.Error("checksum ignores DeleteSpool")
			}
			st := reflect.TypeFor[DeleteSpool]()
			for j := range st.NumField() {
				p, ds := withOne, one
				p.DeleteSpool = &ds
				v := reflect.ValueOf(&ds).Elem().Field(j)
				v.Set(mutate(t, v))
				if changed := p.Checksum() != withOne.Checksum(); changed != (st.Field(j).Name != "Line") {
					t.Errorf("checksum and DeleteSpool.%s: changed %v", st.Field(j).Name, changed)
				}
			}
		case reflect.TypeFor[*ServersFrom]():
			one := ServersFrom{DNS: "a.example", Type: DNSTypeA, Port: 1, Interval: time.Second, MaxChange: 0.5, MaxServers: 9, Line: 3}
			withOne := *base
			withOne.ServersFrom = &one
			if withOne.Checksum() == sum {
				t.Error("checksum ignores ServersFrom")
			}
			st := reflect.TypeFor[ServersFrom]()
			for j := range st.NumField() {
				p, sf := withOne, one
				p.ServersFrom = &sf
				v := reflect.ValueOf(&sf).Elem().Field(j)
				if v.Kind() == reflect.Float64 {
					v.SetFloat(v.Float() / 2)
				} else {
					v.Set(mutate(t, v))
				}
				if changed := p.Checksum() != withOne.Checksum(); changed != (st.Field(j).Name != "Line") {
					t.Errorf("checksum and ServersFrom.%s: changed %v", st.Field(j).Name, changed)
				}
			}
		case reflect.TypeFor[[]Replica]():
			one := Replica{Network: "tcp", Addr: "127.0.0.1:1", Host: "127.0.0.1", Port: 1, Weight: 1, Shard: "s", Line: 9}
			withOne := *base
			withOne.Replicas = []Replica{one}
			if withOne.Checksum() == sum {
				t.Error("checksum ignores Replicas")
			}
			rt := reflect.TypeFor[Replica]()
			for j := range rt.NumField() {
				p := withOne
				p.Replicas = []Replica{one}
				rv := reflect.ValueOf(&p.Replicas[0]).Elem().Field(j)
				rv.Set(mutate(t, rv))
				if changed := p.Checksum() != withOne.Checksum(); changed != (rt.Field(j).Name != "Line") {
					t.Errorf("checksum and Replica.%s: changed %v", rt.Field(j).Name, changed)
				}
			}
		default:
			p := *base
			fv := reflect.ValueOf(&p).Elem().Field(i)
			fv.Set(mutate(t, fv))
			if p.Checksum() == sum {
				t.Errorf("checksum ignores %s", f.Name)
			}
		}
	}
	if base.Timeout != 400*time.Millisecond {
		t.Fatal("mutations leaked into the parsed pool")
	}
}

// Marshal writes the keys in marshalOrder, each as its poolKeys entry
// says: the list must name every key the parser knows, once, and each
// key must know how to write its value.
func TestMarshalOrderHasEveryKey(t *testing.T) {
	seen := make(map[string]bool)
	for _, key := range marshalOrder {
		k, ok := poolKeys[key]
		switch {
		case !ok:
			t.Errorf("marshalOrder has %s, which is no pool key", key)
		case seen[key]:
			t.Errorf("marshalOrder has %s twice", key)
		case k.value == nil:
			t.Errorf("pool key %s has no value encoder", key)
		}
		seen[key] = true
	}
	for key := range poolKeys {
		if !seen[key] {
			t.Errorf("pool key %s is missing from marshalOrder: Marshal would drop it", key)
		}
	}
}

// everyKey sets every pool key, each at a value other than its default,
// over the pools that may hold it.
const everyKey = `mc:
  listen: 127.0.0.1:22121
  hash: xxh3
  hash_tag: "{}"
  distribution: jump
  timeout: 250
  backlog: 100
  client_connections: 10
  redis: false
  slowlog_threshold: 25
  slowlog_max_len: 16
  hot_keys: 5
  preconnect: true
  auto_eject_hosts: true
  server_connections: 2
  server_retry_timeout: 1000
  server_failure_limit: 3
  health_check_interval: 2000
  health_check_timeout: 500
  tcpkeepalive: true
  reuseport: true
  item_size_max: 2097152
  max_request_line: 131072
  flush_all: false
  connect_timeout: 50
  hash_seed: 7
  eject_policy: failover
  failover_pool: spare
  server_protocol: text
  default_version: 1.6.21
  near_cache: 16
  near_cache_ttl: 10
  near_cache_fill: gets
  near_cache_hot: true
  delete_spool:
    path: spool/deletes
    max_bytes: 1048576
    fsync: interval
    fsync_interval: 200
  active_req_limit: 100
  buffer_memory_limit: 1000
  max_keys: 50
  tls_cert: certs/proxy.pem
  tls_key: certs/proxy.key
  tls_client_ca: certs/clients.pem
  server_tls: true
  server_tls_ca: certs/ca.pem
  server_tls_cert: certs/client.pem
  server_tls_key: certs/client.key
  server_tls_server_name: mc.internal
  servers:
   - 127.0.0.1:11211:1 a
spare:
  listen: 127.0.0.1:22122
  server_protocol: text
  server_tls: true
  server_tls_skip_verify: true
  servers:
   - 127.0.0.1:11212:1
found:
  listen: 127.0.0.1:22128
  servers_from:
    dns: cache.example
    type: A
    port: 11211
    interval: 1000
    resolver: 127.0.0.1:5353
    max_change: 0.25
    max_servers: 10
rd:
  listen: 127.0.0.1:22123
  redis: true
  redis_auth: secret
  redis_auth_user: alice
  redis_db: 2
  redis_flushall: true
  redis_config: true
  redis_cluster_view: true
  redis_scripts: dedicated
  blocking_connections: 8
  read_from: replica
  servers:
   - 127.0.0.1:6379:1 a
  replicas:
   - 127.0.0.1:6380:1 a
watched:
  listen: 127.0.0.1:22124
  redis: true
  sentinels:
   - 127.0.0.1:26379
  sentinel_auth: secret
  sentinel_auth_user: bob
  servers:
   - mymaster:1
cl:
  listen: 127.0.0.1:22125
  redis: true
  redis_cluster: true
  cluster_refresh: 1000
  servers:
   - 127.0.0.1:7000:1
moving:
  listen: 127.0.0.1:22129
  route:
    migrate:
      from: found
      to: unlistened
      phase: warm
      at:
        to_only: 2030-01-01T00:00:00Z
    shadow:
      pool: found
      fraction: 0.5
      requests: reads
      queue: 10
    failover:
      pool: found
      on: error_or_miss
unlistened:
  servers:
   - 127.0.0.1:11219:1
routed:
  listen: 127.0.0.1:22126
  lua:
    - route.lua
    - more.lua
  lua_arg: x
  lua_dirs:
    - /etc/shardproxy/lua
  listen_tags:
    b: 127.0.0.1:22127
  lua_timeout: 50
  lua_max_alloc: 10
  lua_internal_cache: 8
`

// A configuration that sets every key reads back from Marshal with every
// key written and every value kept: encode and parse stay in step.
func TestMarshalWritesEveryKey(t *testing.T) {
	again, text := roundTrip(t, mustParse(t, everyKey))
	for key := range poolKeys {
		written := false
		for _, p := range again.Pools {
			written = written || p.IsSet(key)
		}
		if !written {
			t.Errorf("Marshal did not write %s:\n%s", key, text)
		}
	}
}
