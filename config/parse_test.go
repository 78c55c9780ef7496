package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// src names inline test inputs in messages.
const src = "testdata/x.yml"

// mustParse parses text or fails the test.
func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse([]byte(text), src)
	if err != nil {
		t.Fatalf("Parse: %v\ninput:\n%s", err, text)
	}
	return c
}

// tcp is a tcp server as the servers list describes it.
func tcp(host string, port, weight int, name string, line int) Server {
	return Server{Network: "tcp", Addr: host + ":" + strconv.Itoa(port), Host: host, Port: port, Weight: weight, Name: name, Line: line}
}

// defaults returns a parsed pool with every default and the given identity,
// whose file set listen and servers only.
func defaults(name string, line int, listen string, servers ...Server) *Pool {
	p := newPool(name, line)
	p.Listen = Listen{Network: "tcp", Addr: listen}
	p.ConnectTimeout = DefaultConnectTimeout
	p.Servers = servers
	p.set = map[string]bool{"listen": true, "servers": true}
	return p
}

// alsoSet records keys as set in a pool from defaults.
func alsoSet(p *Pool, keys ...string) {
	for _, k := range keys {
		p.set[k] = true
	}
}

func TestLoadNutcracker(t *testing.T) {
	c, err := Load("testdata/nutcracker.yml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != "testdata/nutcracker.yml" {
		t.Errorf("Source = %q", c.Source)
	}

	alpha := defaults("alpha", 3, "127.0.0.1:22121", tcp("127.0.0.1", 6379, 1, "127.0.0.1:6379", 12))
	alpha.AutoEjectHosts, alpha.Redis = true, true
	alpha.ItemSizeMax = DefaultRedisItemSizeMax
	alpha.ServerRetryTimeout, alpha.ServerFailureLimit = 2*time.Second, 1
	alsoSet(alpha, "hash", "distribution", "auto_eject_hosts", "redis", "server_retry_timeout", "server_failure_limit")

	beta := defaults("beta", 14, "127.0.0.1:22122",
		tcp("127.0.0.1", 6380, 1, "server1", 23), tcp("127.0.0.1", 6381, 1, "server2", 24),
		tcp("127.0.0.1", 6382, 1, "server3", 25), tcp("127.0.0.1", 6383, 1, "server4", 26))
	beta.HashTag, beta.Timeout, beta.Redis = "{}", 400*time.Millisecond, true
	beta.ItemSizeMax = DefaultRedisItemSizeMax
	beta.ConnectTimeout = 400 * time.Millisecond
	alsoSet(beta, "hash", "hash_tag", "distribution", "auto_eject_hosts", "timeout", "redis")

	gamma := defaults("gamma", 28, "127.0.0.1:22123",
		tcp("127.0.0.1", 11212, 1, "127.0.0.1:11212", 39), tcp("127.0.0.1", 11213, 1, "127.0.0.1:11213", 40))
	gamma.Timeout, gamma.ConnectTimeout = 400*time.Millisecond, 400*time.Millisecond
	gamma.Backlog, gamma.Preconnect, gamma.AutoEjectHosts = 1024, true, true
	gamma.ServerRetryTimeout, gamma.ServerFailureLimit = 2*time.Second, 3
	alsoSet(gamma, "hash", "distribution", "timeout", "backlog", "preconnect", "auto_eject_hosts",
		"server_retry_timeout", "server_failure_limit")

	delta := defaults("delta", 42, "127.0.0.1:22124")
	for i := range 10 {
		delta.Servers = append(delta.Servers, tcp("127.0.0.1", 11214+i, 1, "127.0.0.1:"+strconv.Itoa(11214+i), 51+i))
	}
	delta.Timeout, delta.ConnectTimeout, delta.AutoEjectHosts = 100*time.Millisecond, 100*time.Millisecond, true
	delta.ServerRetryTimeout, delta.ServerFailureLimit = 2*time.Second, 1
	alsoSet(delta, "hash", "distribution", "timeout", "auto_eject_hosts", "server_retry_timeout", "server_failure_limit")

	omega := defaults("omega", 62, "",
		tcp("127.0.0.1", 11214, 100000, "127.0.0.1:11214", 68), tcp("127.0.0.1", 11215, 1, "127.0.0.1:11215", 69))
	omega.Listen = Listen{Network: "unix", Addr: "/tmp/gamma", Perm: 0o666}
	omega.Hash = "hsieh"
	alsoSet(omega, "hash", "distribution", "auto_eject_hosts")

	sigma := defaults("sigma", 71, "127.0.0.1:22125",
		tcp("127.0.0.1", 6390, 1, "127.0.0.1:6390", 81), tcp("127.0.0.1", 6391, 1, "127.0.0.1:6391", 82))
	sigma.Redis, sigma.RedisAuth, sigma.RedisDB = true, "s3cret pass", 2
	sigma.ItemSizeMax = DefaultRedisItemSizeMax
	sigma.ServerConnections, sigma.TCPKeepalive = 2, true
	alsoSet(sigma, "hash", "distribution", "redis", "redis_auth", "redis_db", "server_connections", "tcpkeepalive")

	want := []*Pool{beta, alpha, delta, gamma, omega, sigma}
	if len(c.Pools) != len(want) {
		t.Fatalf("got %d pools, want %d", len(c.Pools), len(want))
	}
	for i, w := range want {
		if got := c.Pools[i]; !reflect.DeepEqual(got, w) {
			t.Errorf("pool %d:\n got %+v\nwant %+v", i, *got, *w)
		}
	}
	if c.Pool("omega") != c.Pools[4] || c.Pool("nope") != nil {
		t.Error("Config.Pool does not find pools by name")
	}
}

func TestPoolOrder(t *testing.T) {
	text := ""
	for i, name := range []string{"bb", "a", "ccc", "ab", "b", "B", "server10", "server9"} {
		text += name + ":\n  listen: 127.0.0.1:" + strconv.Itoa(20000+i) + "\n  servers:\n   - 127.0.0.1:11211:1\n"
	}
	c := mustParse(t, text)
	var got []string
	for _, p := range c.Pools {
		got = append(got, p.Name)
	}
	want := []string{"B", "a", "b", "ab", "bb", "ccc", "server9", "server10"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool order %q, want %q", got, want)
	}
}

func TestSortedServers(t *testing.T) {
	c := mustParse(t, `alpha:
  listen: 127.0.0.1:22121
  servers:
   - 10.0.0.1:11211:1 server10
   - 10.0.0.2:11211:1 server9
   - 10.0.0.3:11211:1 server1
   - 10.0.0.4:11211:1 a
`)
	p := c.Pools[0]
	var got []string
	for _, s := range p.SortedServers() {
		got = append(got, s.Name)
	}
	if want := []string{"a", "server1", "server9", "server10"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SortedServers names %q, want %q", got, want)
	}
	if p.Servers[0].Name != "server10" {
		t.Error("SortedServers changed the pool's Servers")
	}
}

func TestParseValid(t *testing.T) {
	const head = "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - 127.0.0.1:11211:1\n"
	tests := []struct {
		name  string
		text  string
		check func(t *testing.T, p *Pool)
	}{
		{"defaults", head, func(t *testing.T, p *Pool) {
			want := defaults("alpha", 1, "127.0.0.1:22121", tcp("127.0.0.1", 11211, 1, "127.0.0.1", 4))
			if !reflect.DeepEqual(p, want) {
				t.Errorf("got %+v\nwant %+v", *p, *want)
			}
		}},
		{"timeout -1 waits forever", head + "  timeout: -1\n", func(t *testing.T, p *Pool) {
			if p.Timeout != 0 || p.ConnectTimeout != time.Second {
				t.Errorf("Timeout %v ConnectTimeout %v", p.Timeout, p.ConnectTimeout)
			}
		}},
		{"timeout 0 waits forever", head + "  timeout: 0\n", func(t *testing.T, p *Pool) {
			if p.Timeout != 0 {
				t.Errorf("Timeout %v", p.Timeout)
			}
		}},
		{"quoted and zero-padded numbers", head + "  timeout: \"400\"\n  backlog: '0100'\n", func(t *testing.T, p *Pool) {
			if p.Timeout != 400*time.Millisecond || p.Backlog != 100 || p.ConnectTimeout != 400*time.Millisecond {
				t.Errorf("Timeout %v Backlog %d ConnectTimeout %v", p.Timeout, p.Backlog, p.ConnectTimeout)
			}
		}},
		{"quoted booleans", head + "  redis: \"true\"\n  preconnect: 'false'\n", func(t *testing.T, p *Pool) {
			if !p.Redis || p.Preconnect {
				t.Errorf("Redis %v Preconnect %v", p.Redis, p.Preconnect)
			}
		}},
		{"redis_auth is text even when it looks like a number", head + "  redis: true\n  redis_auth: 12345\n", func(t *testing.T, p *Pool) {
			if p.RedisAuth != "12345" {
				t.Errorf("RedisAuth %q", p.RedisAuth)
			}
		}},
		{"empty redis_auth on a memcached pool", head + "  redis_auth: \"\"\n", func(t *testing.T, p *Pool) {
			if p.Redis || p.RedisAuth != "" {
				t.Errorf("Redis %v RedisAuth %q", p.Redis, p.RedisAuth)
			}
		}},
		{"redis_db on a memcached pool is accepted, as by twemproxy", head + "  redis_db: 3\n", func(t *testing.T, p *Pool) {
			if p.RedisDB != 3 {
				t.Errorf("RedisDB %d", p.RedisDB)
			}
		}},
		{"hash tag $$", head + "  hash_tag: $$\n", func(t *testing.T, p *Pool) {
			if p.HashTag != "$$" {
				t.Errorf("HashTag %q", p.HashTag)
			}
		}},
		{"explicit zeros are kept", head + "  server_retry_timeout: 0\n  server_failure_limit: 0\n  client_connections: 0\n", func(t *testing.T, p *Pool) {
			if p.ServerRetryTimeout != 0 || p.ServerFailureLimit != 0 {
				t.Errorf("ServerRetryTimeout %v ServerFailureLimit %d", p.ServerRetryTimeout, p.ServerFailureLimit)
			}
		}},
		{"client_connections kept", head + "  client_connections: 100\n", func(t *testing.T, p *Pool) {
			if p.ClientConnections != 100 {
				t.Errorf("ClientConnections %d", p.ClientConnections)
			}
		}},
		{"tcpkeepalive and reuseport", head + "  tcpkeepalive: true\n  reuseport: true\n", func(t *testing.T, p *Pool) {
			if !p.TCPKeepalive || !p.Reuseport {
				t.Errorf("TCPKeepalive %v Reuseport %v", p.TCPKeepalive, p.Reuseport)
			}
		}},
		{"extensions", head + "  item_size_max: 1024\n  max_request_line: 2048\n  flush_all: false\n  connect_timeout: 20\n  timeout: 300\n", func(t *testing.T, p *Pool) {
			if p.ItemSizeMax != 1024 || p.MaxRequestLine != 2048 || p.AllowFlushAll || p.ConnectTimeout != 20*time.Millisecond {
				t.Errorf("ItemSizeMax %d MaxRequestLine %d AllowFlushAll %v ConnectTimeout %v", p.ItemSizeMax, p.MaxRequestLine, p.AllowFlushAll, p.ConnectTimeout)
			}
		}},
		{"hash_seed hex with xxh3", head + "  hash: xxh3\n  hash_seed: 0xFF\n", func(t *testing.T, p *Pool) {
			if p.HashSeed != 255 {
				t.Errorf("HashSeed %d", p.HashSeed)
			}
		}},
		{"hash_seed decimal with random", head + "  distribution: random\n  hash_seed: 18446744073709551615\n", func(t *testing.T, p *Pool) {
			if p.HashSeed != 1<<64-1 {
				t.Errorf("HashSeed %d", p.HashSeed)
			}
		}},
		{"hash_seed 0 with any hash", head + "  hash_seed: 0\n", func(t *testing.T, p *Pool) {
			if p.HashSeed != 0 {
				t.Errorf("HashSeed %d", p.HashSeed)
			}
		}},
		{"listen on every address", "alpha:\n  listen: :22121\n  servers:\n   - h:1:1\n", func(t *testing.T, p *Pool) {
			if p.Listen != (Listen{Network: "tcp", Addr: ":22121"}) {
				t.Errorf("Listen %+v", p.Listen)
			}
		}},
		{"unix listen without permission", "alpha:\n  listen: /tmp/alpha.sock\n  servers:\n   - h:1:1\n", func(t *testing.T, p *Pool) {
			if p.Listen != (Listen{Network: "unix", Addr: "/tmp/alpha.sock"}) {
				t.Errorf("Listen %+v", p.Listen)
			}
		}},
		{"document start marker", "---\n" + head, func(t *testing.T, p *Pool) {
			if p.Line != 2 {
				t.Errorf("Line %d", p.Line)
			}
		}},
		{"CRLF line ends and comments", "# comment\r\nalpha: # pool\r\n  listen: 127.0.0.1:22121\r\n  servers:\r\n   - 127.0.0.1:11211:1 # one\r\n", func(t *testing.T, p *Pool) {
			if p.Line != 2 || len(p.Servers) != 1 || p.Servers[0].Name != "127.0.0.1" || p.Servers[0].Line != 5 {
				t.Errorf("Line %d Servers %+v", p.Line, p.Servers)
			}
		}},
		{"keys in any order", "alpha:\n  servers:\n   - 127.0.0.1:11211:1\n  hash: md5\n  listen: 127.0.0.1:22121\n", func(t *testing.T, p *Pool) {
			if p.Hash != "md5" || p.Listen.Addr != "127.0.0.1:22121" {
				t.Errorf("Hash %q Listen %+v", p.Hash, p.Listen)
			}
		}},
		{"same address, different names", head + "   - 127.0.0.1:11211:1 other\n", func(t *testing.T, p *Pool) {
			if len(p.Servers) != 2 || p.Servers[1].Name != "other" {
				t.Errorf("Servers %+v", p.Servers)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, tt.text)
			if len(c.Pools) != 1 {
				t.Fatalf("got %d pools", len(c.Pools))
			}
			tt.check(t, c.Pools[0])
		})
	}
}

func TestHashesAndDistributions(t *testing.T) {
	for _, h := range hashes {
		for _, d := range distributions {
			t.Run(h+"/"+d, func(t *testing.T) {
				c := mustParse(t, "p:\n  listen: 127.0.0.1:1\n  hash: "+h+"\n  distribution: "+d+"\n  servers:\n   - h:2:1\n")
				if p := c.Pools[0]; p.Hash != h || p.Distribution != d {
					t.Errorf("Hash %q Distribution %q", p.Hash, p.Distribution)
				}
			})
		}
	}
}

// pool is a valid pool called alpha with extra lines after line 2, so the
// first extra line is line 3 and the server is the last line.
func pool(extra string) string {
	return "alpha:\n  listen: 127.0.0.1:22121\n" + extra + "  servers:\n   - 127.0.0.1:11211:1\n"
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want string // the whole message of the first problem
	}{
		{"unknown hash", pool("  hash: foo\n"),
			`config: testdata/x.yml:3: pool "alpha": hash: unknown hash "foo"`},
		{"hash is case sensitive", pool("  hash: FNV1A_64\n"),
			`config: testdata/x.yml:3: pool "alpha": hash: unknown hash "FNV1A_64"`},
		{"unknown distribution", pool("  distribution: consistent\n"),
			`config: testdata/x.yml:3: pool "alpha": distribution: unknown distribution "consistent"`},
		{"hash_tag of one char", pool("  hash_tag: \"{\"\n"),
			`config: testdata/x.yml:3: pool "alpha": hash_tag: "{" is not exactly 2 characters (bytes), such as "{}"`},
		{"hash_tag of three chars", pool("  hash_tag: \"{}}\"\n"),
			`config: testdata/x.yml:3: pool "alpha": hash_tag: "{}}" is not exactly 2 characters (bytes), such as "{}"`},
		{"hash_tag unquoted braces is a flow mapping", pool("  hash_tag: {}\n"),
			`config: testdata/x.yml:3: pool "alpha": hash_tag: YAML flow style ({...}, [...]) is not supported (twemproxy refuses it); use block style`},
		{"unknown eject policy", pool("  auto_eject_hosts: true\n  eject_policy: drop\n"),
			`config: testdata/x.yml:4: pool "alpha": eject_policy: unknown policy "drop"; want remap, fail_fast or failover`},
		{"eject policy without auto eject", pool("  eject_policy: fail_fast\n"),
			`config: testdata/x.yml:3: pool "alpha": eject_policy: needs auto_eject_hosts: true`},
		{"failover without pool", pool("  auto_eject_hosts: true\n  eject_policy: failover\n"),
			`config: testdata/x.yml:4: pool "alpha": failover_pool: is missing; eject_policy failover needs it`},
		{"failover pool without policy", pool("  failover_pool: beta\n"),
			`config: testdata/x.yml:3: pool "alpha": failover_pool: is only valid with eject_policy: failover`},
		{"failover to itself", pool("  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: alpha\n"),
			`config: testdata/x.yml:5: pool "alpha": failover_pool: cannot name the pool itself`},
		{"failover to a missing pool", pool("  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: beta\n"),
			`config: testdata/x.yml:5: pool "alpha": failover_pool: no pool is called "beta"`},
		{"failover to another protocol", pool("  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: beta\n") +
			"beta:\n  listen: 127.0.0.1:22200\n  redis: true\n  servers:\n   - 127.0.0.1:6379:1\n",
			`config: testdata/x.yml:5: pool "alpha": failover_pool: pool "beta" speaks another protocol`},
		{"lua and servers", pool("  lua: routes.lua\n"),
			`config: testdata/x.yml:3: pool "alpha": lua: a Lua pool defines its backends in its route file; remove servers`},
		{"failover to a Lua pool", pool("  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: beta\n") +
			"beta:\n  listen: 127.0.0.1:22200\n  lua: routes.lua\n",
			`config: testdata/x.yml:5: pool "alpha": failover_pool: pool "beta" is a Lua pool, which has no servers to pick from`},
		{"unknown key", pool("  foo: 1\n"),
			`config: testdata/x.yml:3: pool "alpha": foo: unknown key`},
		{"twemproxy fork key", pool("  command: x\n"),
			`config: testdata/x.yml:3: pool "alpha": command: unknown key`},
		{"duplicate key", pool("  listen: 127.0.0.1:22122\n"),
			`config: testdata/x.yml:3: pool "alpha": listen: duplicate key (first at line 2)`},
		{"missing listen", "alpha:\n  hash: md5\n  servers:\n   - 127.0.0.1:11211:1\n",
			`config: testdata/x.yml:1: pool "alpha": listen: is missing`},
		{"missing servers", "alpha:\n  listen: 127.0.0.1:22121\n",
			`config: testdata/x.yml:1: pool "alpha": servers: is missing`},
		{"servers is one value", "alpha:\n  listen: 127.0.0.1:22121\n  servers: 127.0.0.1:11211:1\n",
			`config: testdata/x.yml:3: pool "alpha": servers: must be a list of "host:port:weight [name]" lines, not a single value`},
		{"servers is empty", "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n",
			`config: testdata/x.yml:3: pool "alpha": servers: must be a list of "host:port:weight [name]" lines, not a single value`},
		{"servers in flow style", "alpha:\n  listen: 127.0.0.1:22121\n  servers: [\"127.0.0.1:11211:1\"]\n",
			`config: testdata/x.yml:3: pool "alpha": servers: YAML flow style ({...}, [...]) is not supported (twemproxy refuses it); use block style`},
		{"server is a mapping", "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - host: a\n",
			`config: testdata/x.yml:4: pool "alpha": servers: a server must be one "host:port:weight [name]" line, not a mapping`},
		{"listen without port", "alpha:\n  listen: localhost\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:2: pool "alpha": listen: "localhost" has no port; want "host:port" or "/path/to/socket [perm]"`},
		{"listen permission too wide", "alpha:\n  listen: /tmp/gamma 01777\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:2: pool "alpha": listen: invalid permission "01777" in "/tmp/gamma 01777"; want octal digits, at most 0777`},
		{"listen permission not octal", "alpha:\n  listen: /tmp/gamma 0668\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:2: pool "alpha": listen: invalid permission "0668" in "/tmp/gamma 0668"; want octal digits, at most 0777`},
		{"listen empty", "alpha:\n  listen: \"\"\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:2: pool "alpha": listen: is empty; want "host:port" or "/path/to/socket [perm]"`},
		{"listen is a list", "alpha:\n  listen:\n   - 127.0.0.1:1\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:3: pool "alpha": listen: must be a single value, not a list`},
		{"timeout not a number", pool("  timeout: abc\n"),
			`config: testdata/x.yml:3: pool "alpha": timeout: "abc" is not a number`},
		{"timeout -2", pool("  timeout: -2\n"),
			`config: testdata/x.yml:3: pool "alpha": timeout: "-2" is not a number`},
		{"timeout with a unit", pool("  timeout: 400ms\n"),
			`config: testdata/x.yml:3: pool "alpha": timeout: "400ms" is not a number`},
		{"timeout too large", pool("  timeout: 2147483648\n"),
			`config: testdata/x.yml:3: pool "alpha": timeout: 2147483648 is out of range [0, 2147483647]`},
		{"timeout empty", pool("  timeout:\n"),
			`config: testdata/x.yml:3: pool "alpha": timeout: "" is not a number`},
		{"backlog negative", pool("  backlog: -1\n"),
			`config: testdata/x.yml:3: pool "alpha": backlog: "-1" is not a number`},
		{"backlog float", pool("  backlog: 1.5\n"),
			`config: testdata/x.yml:3: pool "alpha": backlog: "1.5" is not a number`},
		{"redis yes", pool("  redis: yes\n"),
			`config: testdata/x.yml:3: pool "alpha": redis: "yes" is not true or false`},
		{"redis True", pool("  redis: True\n"),
			`config: testdata/x.yml:3: pool "alpha": redis: "True" is not true or false`},
		{"flush_all maybe", pool("  flush_all: maybe\n"),
			`config: testdata/x.yml:3: pool "alpha": flush_all: "maybe" is not true or false`},
		{"redis_flushall without redis", pool("  redis_flushall: true\n"),
			`config: testdata/x.yml:3: pool "alpha": redis_flushall: is only valid for a redis pool (redis: true)`},
		{"redis_config without redis", pool("  redis_config: true\n"),
			`config: testdata/x.yml:3: pool "alpha": redis_config: is only valid for a redis pool (redis: true)`},
		{"redis_config on a Lua pool", "lp:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  redis: true\n  redis_config: true\n",
			`config: testdata/x.yml:5: pool "lp": redis_config: a Lua pool does not carry CONFIG`},
		{"redis_config maybe", pool("  redis: true\n  redis_config: maybe\n"),
			`config: testdata/x.yml:4: pool "alpha": redis_config: "maybe" is not true or false`},
		{"redis_auth without redis", pool("  redis_auth: secret\n"),
			`config: testdata/x.yml:3: pool "alpha": redis_auth: is only valid for a redis pool (redis: true)`},
		{"redis_auth with redis false", pool("  redis: false\n  redis_auth: secret\n"),
			`config: testdata/x.yml:4: pool "alpha": redis_auth: is only valid for a redis pool (redis: true)`},
		{"blocking_connections without redis", pool("  blocking_connections: 8\n"),
			`config: testdata/x.yml:3: pool "alpha": blocking_connections: is only valid for a redis pool (redis: true)`},
		{"blocking_connections 0", pool("  redis: true\n  blocking_connections: 0\n"),
			`config: testdata/x.yml:4: pool "alpha": blocking_connections: 0 is out of range [1, 65536]`},
		{"redis_db negative", pool("  redis: true\n  redis_db: -1\n"),
			`config: testdata/x.yml:4: pool "alpha": redis_db: "-1" is not a number`},
		{"server_connections 0", pool("  server_connections: 0\n"),
			`config: testdata/x.yml:3: pool "alpha": server_connections: cannot be 0`},
		{"server_connections too many", pool("  server_connections: 4097\n"),
			`config: testdata/x.yml:3: pool "alpha": server_connections: 4097 is out of range [0, 4096]`},
		{"item_size_max too small", pool("  item_size_max: 100\n"),
			`config: testdata/x.yml:3: pool "alpha": item_size_max: 100 is out of range [1024, 1073741824]`},
		{"max_request_line too small", pool("  max_request_line: 2047\n"),
			`config: testdata/x.yml:3: pool "alpha": max_request_line: 2047 is out of range [2048, 67108864]`},
		{"connect_timeout 0", pool("  connect_timeout: 0\n"),
			`config: testdata/x.yml:3: pool "alpha": connect_timeout: 0 is out of range [1, 2147483647]`},
		{"hash_seed without effect", pool("  hash_seed: 7\n"),
			`config: testdata/x.yml:3: pool "alpha": hash_seed: has no effect with hash fnv1a_64 and distribution ketama; it seeds the hashes xxhash, murmur3, xxh3 and the distribution random`},
		{"hash_seed not a number", pool("  hash: xxh3\n  hash_seed: -1\n"),
			`config: testdata/x.yml:4: pool "alpha": hash_seed: "-1" is not a number from 0 to 2^64-1 (decimal or 0x hex)`},
		{"hash_seed too large", pool("  hash: xxh3\n  hash_seed: 18446744073709551616\n"),
			`config: testdata/x.yml:4: pool "alpha": hash_seed: "18446744073709551616" is not a number from 0 to 2^64-1 (decimal or 0x hex)`},
		{"zero weight", pool("") + "   - 127.0.0.2:11211:0\n",
			`config: testdata/x.yml:5: pool "alpha": servers: zero weight in "127.0.0.2:11211:0"; want an integer > 0`},
		{"bad weight", pool("") + "   - 127.0.0.2:11211:heavy\n",
			`config: testdata/x.yml:5: pool "alpha": servers: invalid weight "heavy" in "127.0.0.2:11211:heavy"; want an integer > 0`},
		{"no port", pool("") + "   - 127.0.0.2:11211\n",
			`config: testdata/x.yml:5: pool "alpha": servers: "127.0.0.2:11211" has no port; want "host:port:weight [name]" or "/path/to/socket:weight [name]"`},
		{"bad port", pool("") + "   - 127.0.0.2:99999:1\n",
			`config: testdata/x.yml:5: pool "alpha": servers: invalid port "99999" in "127.0.0.2:99999:1"; want 1 to 65535`},
		{"duplicate server", pool("") + "   - 127.0.0.1:11211:2\n",
			`config: testdata/x.yml:5: pool "alpha": servers: duplicate server name "127.0.0.1" (first at line 4)`},
		{"explicit name equal to a derived one", pool("") + "   - 10.0.0.9:6379:1 127.0.0.1\n",
			`config: testdata/x.yml:5: pool "alpha": servers: duplicate server name "127.0.0.1" (first at line 4)`},
		{"duplicate unix server", "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - /tmp/a.sock:1\n   - /tmp/a.sock:2\n",
			`config: testdata/x.yml:5: pool "alpha": servers: duplicate server name "/tmp/a.sock:" (first at line 4)`},
		{"duplicate pool name", pool("") + pool(""),
			`config: testdata/x.yml:5: pool "alpha": duplicate pool name (first at line 1)`},
		{"duplicate listen", pool("") + "beta:\n  listen: 127.0.0.1:22121\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:6: pool "beta": listen: 127.0.0.1:22121 is also the listen address of pool "alpha" (line 2)`},
		{"duplicate listen, IPv6 written two ways", "a:\n  listen: \"[::1]:1\"\n  servers:\n   - h:1:1\nb:\n  listen: ::1:1\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:6: pool "b": listen: [::1]:1 is also the listen address of pool "a" (line 2)`},
		{"duplicate unix listen with another permission", "a:\n  listen: /tmp/s 0600\n  servers:\n   - h:1:1\nb:\n  listen: /tmp/s\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:6: pool "b": listen: /tmp/s is also the listen address of pool "a" (line 2)`},
		{"empty input", "", `config: testdata/x.yml: no pools`},
		{"only comments", "# nothing\n", `config: testdata/x.yml: no pools`},
		{"empty mapping", "{}\n", `config: testdata/x.yml:1: YAML flow style ({...}, [...]) is not supported (twemproxy refuses it); use block style`},
		{"top level scalar", "hello\n", `config: testdata/x.yml:1: the top level must map pool names to pools`},
		{"top level list", "- a\n- b\n", `config: testdata/x.yml:1: the top level must map pool names to pools`},
		{"pool is a scalar", "alpha: 1\n", `config: testdata/x.yml:1: pool "alpha": must be a mapping of keys such as listen and servers, not a single value`},
		{"pool is empty", "alpha:\n", `config: testdata/x.yml:1: pool "alpha": must be a mapping of keys such as listen and servers, not a single value`},
		{"pool in flow style", "alpha: {listen: 127.0.0.1:1}\n", `config: testdata/x.yml:1: pool "alpha": YAML flow style ({...}, [...]) is not supported (twemproxy refuses it); use block style`},
		{"empty pool name", "\"\":\n  listen: 127.0.0.1:1\n", `config: testdata/x.yml:1: a pool name must be a non-empty string`},
		// yaml.v3 names the line of the mapping the problem is in.
		{"YAML syntax", "alpha:\n  listen: 127.0.0.1:22121\n servers: x\n", `config: testdata/x.yml:2: yaml: did not find expected key`},
		{"tab indentation", "alpha:\n\tlisten: 127.0.0.1:22121\n", `config: testdata/x.yml:2: yaml: found character that cannot start any token`},
		{"two documents", pool("") + "---\n" + pool(""), `config: testdata/x.yml:5: more than one YAML document; twemproxy reads exactly one`},
		{"anchor", "alpha: &a\n  listen: 127.0.0.1:1\n  servers:\n   - h:1:1\n", `config: testdata/x.yml:1: pool "alpha": YAML anchors are not supported (twemproxy refuses them)`},
		{"alias", pool("  hash: &h md5\n") + "beta:\n  listen: 127.0.0.1:2\n  hash: *h\n  servers:\n   - h:1:1\n",
			`config: testdata/x.yml:3: pool "alpha": hash: YAML anchors are not supported (twemproxy refuses them)`},
		{"tag", pool("  timeout: !!int 400\n"), `config: testdata/x.yml:3: pool "alpha": timeout: YAML tags are not supported (twemproxy refuses them)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.text), src)
			if err == nil {
				t.Fatalf("Parse succeeded with %d pools, want error %q", len(c.Pools), tt.want)
			}
			if c != nil {
				t.Error("Parse returned a Config with an error")
			}
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

func TestErrorFields(t *testing.T) {
	_, err := Parse([]byte(pool("  hash: foo\n")), "conf/nutcracker.yml")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	want := Error{Source: "conf/nutcracker.yml", Line: 3, Pool: "alpha", Key: "hash", Msg: `unknown hash "foo"`}
	if *e != want {
		t.Errorf("got %+v, want %+v", *e, want)
	}
	if _, err := Parse([]byte("x"), ""); err == nil || !strings.HasPrefix(err.Error(), "config: <inline>:1: ") {
		t.Errorf("inline error %v", err)
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	text := "alpha:\n  listen: 127.0.0.1:22121\n  hash: foo\n  redis: maybe\n  servers:\n   - a:1:0\n   - b:1:1\n   - c:x:1\n" +
		"beta:\n  hash: md5\n"
	_, err := Parse([]byte(text), src)
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`config: testdata/x.yml:3: pool "alpha": hash: unknown hash "foo"`,
		`config: testdata/x.yml:4: pool "alpha": redis: "maybe" is not true or false`,
		`config: testdata/x.yml:6: pool "alpha": servers: zero weight in "a:1:0"; want an integer > 0`,
		`config: testdata/x.yml:8: pool "alpha": servers: invalid port "x" in "c:x:1"; want 1 to 65535`,
		`config: testdata/x.yml:9: pool "beta": listen: is missing`,
		`config: testdata/x.yml:9: pool "beta": servers: is missing`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseStopsAfterTenProblems(t *testing.T) {
	text := "alpha:\n  listen: 127.0.0.1:22121\n  servers:\n   - h:1:1\n"
	for i := range 20 {
		text += "  unknown" + strconv.Itoa(i+1) + ": 1\n"
	}
	_, err := Parse([]byte(text), src)
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || lines[maxErrors] != "config: testdata/x.yml: too many errors" {
		t.Errorf("got %d lines:\n%s", len(lines), err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yml")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "config: open testdata/does-not-exist.yml") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(path, []byte(pool("  hash: foo\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	if want := "config: " + path + `:3: pool "alpha": hash: unknown hash "foo"`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

func TestLuaPool(t *testing.T) {
	c, err := Parse([]byte("lp:\n  listen: 127.0.0.1:0\n  lua: routes/main.lua\n"), "/etc/shardproxy/conf.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pool("lp")
	if p.Lua != "routes/main.lua" || len(p.Servers) != 0 {
		t.Fatalf("pool %+v", p)
	}
	if got := c.Path(p.Lua); got != "/etc/shardproxy/routes/main.lua" {
		t.Fatalf("Path = %q", got)
	}
	if got := c.Path("/abs.lua"); got != "/abs.lua" {
		t.Fatalf("Path(abs) = %q", got)
	}
	// A configuration that is no file (a fleet's from etcd) resolves
	// against its Dir.
	c.Dir = "/srv/proxy"
	if got := c.Path(p.Lua); got != "/srv/proxy/routes/main.lua" {
		t.Fatalf("Path with Dir = %q", got)
	}
	c.Dir = ""
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if c2, err := Parse(out, "x.yml"); err != nil || c2.Pool("lp").Lua != "routes/main.lua" {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
}

func TestAdminSection(t *testing.T) {
	c, err := Parse([]byte("shardproxy:\n  stats_listen: 127.0.0.1:22222\n  admin_listen: 127.0.0.1:0\n  admin_token: s3cret\n"+pool("")), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin != (Admin{StatsListen: "127.0.0.1:22222", HTTPListen: "127.0.0.1:0", Token: "s3cret"}) || len(c.Pools) != 1 {
		t.Fatalf("admin %+v, pools %d", c.Admin, len(c.Pools))
	}
	for in, want := range map[string]Traces{
		"trace_endpoint: http://c:4318\n":                                         {Endpoint: "http://c:4318", Sample: DefaultTraceSample},
		"trace_endpoint: c:4318\n  trace_sample: 0\n  trace_slow: false\n":        {Endpoint: "c:4318", SlowOff: true},
		"trace_endpoint: https://c/x\n  trace_sample: 1\n  trace_service: edge\n": {Endpoint: "https://c/x", Sample: 1, Service: "edge"},
	} {
		c, err := Parse([]byte("shardproxy:\n  "+in+pool("")), "x.yml")
		if err != nil || c.Admin.Traces != want {
			t.Errorf("%q: %+v %v, want %+v", in, c.Admin.Traces, err, want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"shardproxy:\n  bogus: 1\n", `x.yml:2: pool "shardproxy": bogus: unknown key`},
		{"shardproxy:\n  stats_listen: /tmp/s\n", `x.yml:2: pool "shardproxy": stats_listen: must be host:port`},
		{"shardproxy: 3\n", `x.yml:1: pool "shardproxy": must be a mapping`},
		{"shardproxy:\n  trace_endpoint: collector\n", `x.yml:2: pool "shardproxy": trace_endpoint: "collector" is no URL`},
		{"shardproxy:\n  trace_endpoint: ftp://c:21\n", `x.yml:2: pool "shardproxy": trace_endpoint: "ftp://c:21" is no http or https URL`},
		{"shardproxy:\n  trace_sample: 1.5\n", `x.yml:2: pool "shardproxy": trace_sample: "1.5" is no share between 0 and 1`},
		{"shardproxy:\n  trace_slow: yes\n", `x.yml:2: pool "shardproxy": trace_slow: "yes" is not true or false`},
	} {
		_, err := Parse([]byte(tc.in+pool("")), "x.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}
