package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// placementKeys are keys of every kind placement cares about: ASCII,
// bytes >= 0x80 (sign-extended by some of twemproxy's hashes), hash tags
// and the empty tag.
func placementKeys(n int) []string {
	keys := make([]string, 0, n)
	for i := 0; len(keys) < n; i++ {
		switch i % 5 {
		case 0:
			keys = append(keys, fmt.Sprintf("user:%d", i))
		case 1:
			keys = append(keys, fmt.Sprintf("k\xe9\xff%d\x80", i))
		case 2:
			keys = append(keys, fmt.Sprintf("{tag%d}rest:%d", i%17, i))
		case 3:
			keys = append(keys, fmt.Sprintf("{}empty:%d", i))
		case 4:
			keys = append(keys, fmt.Sprintf("%d:x{t}y", i*7919))
		}
	}
	return keys
}

// pipeline sends every request in one write and reads one reply per request.
func pipeline(t *testing.T, c *client, reqs []string) []string {
	t.Helper()
	go c.send(strings.Join(reqs, ""))
	out := make([]string, len(reqs))
	for i := range reqs {
		out[i] = c.reply()
	}
	return out
}

// TestPlacementEndToEnd writes keys through shardproxy and reads them back
// through a real nutcracker with the same pool: every key must be found, so
// shardproxy put it on the server nutcracker would have used.
func TestPlacementEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs memcached and nutcracker")
	}
	servers := make([]*testserver.Server, 5)
	for i := range servers {
		servers[i] = testserver.StartMemcached(t)
	}
	lines := func(weights []int, named bool) string {
		var b strings.Builder
		for i, s := range servers {
			fmt.Fprintf(&b, "    - %s:%d", s.Addr, weights[i])
			if named {
				fmt.Fprintf(&b, " node%d", 10-i) // names sort unlike addresses
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	equal, unequal := []int{1, 1, 1, 1, 1}, []int{1, 3, 2, 7, 1}
	// More slots than modula keeps a table for: it searches instead.
	large := []int{40000, 30000, 1, 20000, 5}
	hashes := []string{"one_at_a_time", "md5", "crc16", "crc32", "crc32a", "fnv1_64",
		"fnv1a_64", "fnv1_32", "fnv1a_32", "hsieh", "murmur", "jenkins"}
	keys := placementKeys(2000)
	for _, dist := range []string{"ketama", "modula"} {
		for hi, hash := range hashes {
			weights, named := equal, hi%3 == 1
			switch {
			case hi%4 == 3:
				weights = large
			case hi%2 == 1:
				weights = unequal
			}
			name := fmt.Sprintf("%s/%s/weights=%v/named=%t", dist, hash, weights, named)
			t.Run(name, func(t *testing.T) {
				body := fmt.Sprintf("  hash: %s\n  distribution: %s\n  hash_tag: \"{}\"\n  timeout: 5000\n  servers:\n%s",
					hash, dist, lines(weights, named))
				nut, _ := testserver.StartNutcracker(t, "nc:\n  listen: {{LISTEN}}\n"+body)
				_, addr := startProxy(t, "sp:\n  listen: 127.0.0.1:0\n"+body, "sp")
				sp := dial(t, addr)
				if got := sp.do("flush_all\r\n"); got != "OK\r\n" {
					t.Fatalf("flush_all: %q", got)
				}
				sets := make([]string, len(keys))
				gets := make([]string, len(keys))
				for i, k := range keys {
					sets[i] = fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(k), k)
					gets[i] = "get " + k + "\r\n"
				}
				for i, r := range pipeline(t, sp, sets) {
					if r != "STORED\r\n" {
						t.Fatalf("set %q through shardproxy: %q", keys[i], r)
					}
				}
				misses := 0
				nc := dial(t, nut.Addr)
				for i, r := range pipeline(t, nc, gets) {
					want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", keys[i], len(keys[i]), keys[i])
					if r != want {
						misses++
						if misses <= 3 {
							t.Errorf("key %q written by shardproxy, not found by nutcracker: %q", keys[i], r)
						}
					}
				}
				if misses > 0 {
					t.Fatalf("%d of %d keys placed differently from nutcracker", misses, len(keys))
				}
			})
		}
	}
}

// ejectPool starts three memcached servers and a proxy whose pool "mc"
// auto-ejects with policy; a policy of failover also gets pool "fb" with one
// more server. It returns the servers (fb's last) and the proxy's address.
func ejectPool(t *testing.T, policy string) ([]*testserver.Server, string) {
	t.Helper()
	servers := make([]*testserver.Server, 3, 4)
	for i := range servers {
		servers[i] = testserver.StartMemcached(t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mc:\n  listen: 127.0.0.1:0\n  timeout: 500\n  auto_eject_hosts: true\n"+
		"  server_failure_limit: 1\n  server_retry_timeout: 1000\n  eject_policy: %s\n", policy)
	if policy == "failover" {
		b.WriteString("  failover_pool: fb\n")
	}
	b.WriteString("  servers:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "    - %s:1\n", s.Addr)
	}
	if policy == "failover" {
		fb := testserver.StartMemcached(t)
		servers = append(servers, fb)
		fmt.Fprintf(&b, "fb:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1\n", fb.Addr)
	}
	_, addr := startProxy(t, b.String(), "mc")
	return servers, addr
}

// TestEjectPolicies kills one of three servers under each eject_policy and
// checks where its keys and the other servers' keys go, then restarts it.
func TestEjectPolicies(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	for _, policy := range []string{"remap", "fail_fast", "failover"} {
		t.Run(policy, func(t *testing.T) {
			servers, addr := ejectPool(t, policy)
			addrs := []string{servers[0].Addr, servers[1].Addr, servers[2].Addr}
			keys := keysFor(t, addrs, 10)
			victim := servers[1]
			c := dial(t, addr)
			for _, a := range addrs {
				for _, k := range keys[a] {
					if got := c.do(fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(k), k)); got != "STORED\r\n" {
						t.Fatalf("set %s: %q", k, got)
					}
				}
			}
			victim.Stop()
			// The server's socket closing (or the first request failing)
			// reaches the failure limit of 1 and ejects the server; a request
			// that races the ejection fails, one after it is a remapped miss.
			first := c.do("get " + keys[victim.Addr][0] + "\r\n")
			if !strings.HasPrefix(first, "SERVER_ERROR backend failure") && first != "END\r\n" {
				t.Fatalf("first request to the dead server: %q", first)
			}
			for _, k := range keys[victim.Addr][1:] {
				start := time.Now()
				got := c.do(fmt.Sprintf("set %s 0 0 1\r\nz\r\n", k))
				switch policy {
				case "remap", "failover":
					if got != "STORED\r\n" {
						t.Errorf("%s: set of an ejected server's key %s: %q", policy, k, got)
					}
				case "fail_fast":
					if got != "SERVER_ERROR backend failure: markedbad\r\n" {
						t.Errorf("fail_fast: %s: %q", k, got)
					}
					if took := time.Since(start); took > 100*time.Millisecond {
						t.Errorf("fail_fast took %v", took)
					}
				}
			}
			if policy == "failover" { // the keys went to the failover pool's server
				for _, k := range keys[victim.Addr][1:] {
					if v, ok := direct(t, servers[3].Addr, k); !ok || v != "z" {
						t.Errorf("failover: key %s not on the failover server (%q, %t)", k, v, ok)
					}
				}
			}
			// Keys of the live servers never moved: their values are still there.
			for _, a := range []string{addrs[0], addrs[2]} {
				for _, k := range keys[a] {
					want := fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(k), k)
					if got := c.do("get " + k + "\r\n"); got != want {
						t.Errorf("%s: live server's key %s moved or failed: %q", policy, k, got)
					}
				}
			}
			// Back after the retry timeout: its keys are served by it again.
			victim.Restart()
			k := keys[victim.Addr][0]
			deadline := time.Now().Add(5 * time.Second)
			for {
				c.do(fmt.Sprintf("set %s 0 0 4\r\nback\r\n", k))
				if v, ok := direct(t, victim.Addr, k); ok && v == "back" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: restarted server not used again", policy)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// TestAllEjected: with every server ejected, requests get a clear error.
func TestAllEjected(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	servers, yaml := memcachedPool(t, 2, "  timeout: 500\n  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 30000\n")
	_, addr := startProxy(t, yaml, "mc")
	keys := keysFor(t, []string{servers[0].Addr, servers[1].Addr}, 1)
	servers[0].Stop()
	servers[1].Stop()
	c := dial(t, addr)
	c.do("get " + keys[servers[0].Addr][0] + "\r\n")
	c.do("get " + keys[servers[1].Addr][0] + "\r\n")
	if got := c.do("get anykey\r\n"); got != "SERVER_ERROR sharding: all servers ejected\r\n" {
		t.Fatalf("all ejected: %q", got)
	}
}
