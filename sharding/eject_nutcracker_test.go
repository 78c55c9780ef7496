package sharding

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEjectMatchesNutcracker kills memcached servers behind a nutcracker
// pool with auto_eject_hosts and server_failure_limit 1, and checks after
// each ejection that Pool (after Eject) places every key where nutcracker's
// rebuilt distribution does.
func TestEjectMatchesNutcracker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nutcracker and memcached; skipped with -short")
	}
	requireBinary(t, "nutcracker", "apt-get install nutcracker (twemproxy 0.5.0)")
	requireBinary(t, "memcached", "apt-get install memcached")
	keys := placementKeys()[:2000]
	ks := newKeySet(keys)
	for _, dist := range []string{"ketama", "modula"} {
		t.Run(dist, func(t *testing.T) {
			t.Parallel()
			weights := []int{1, 2, 1, 3, 1, 1, 2}
			ports := freePorts(t, len(weights)+2)
			c := &placementCase{name: "eject_" + dist, hash: "fnv1a_64", dist: dist, autoEject: true,
				listen: fmt.Sprintf("127.0.0.1:%d", ports[len(weights)+1])}
			for i, w := range weights {
				c.servers = append(c.servers, caseServer{mc: startMemcachedTCP(t, "127.0.0.1", ports[i]), weight: w})
			}
			startNutcracker(t, c.yaml(), ports[len(weights)], []string{c.listen})
			pool, err := New(c.config())
			if err != nil {
				t.Fatal(err)
			}
			for step, victim := range []int{2, 5} {
				name := pool.Servers()[victim].Name
				for _, s := range c.servers {
					if s.node().Name == name {
						s.mc.proc.stop()
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				if err := provokeEjection(ctx, c.listen, keys); err != nil {
					t.Fatal(err)
				}
				pool.Eject(victim)
				c.value = fmt.Sprintf("eject%d", step)
				if err := mcSetAll(ctx, "tcp", c.listen, keys, c.value); err != nil {
					t.Fatalf("after ejecting %s: set through nutcracker: %v", name, err)
				}
				compareLive(ctx, t, c, pool, ks)
				cancel()
			}
		})
	}
}

// provokeEjection sends single-key gets through nutcracker until one fails
// with SERVER_ERROR: with server_failure_limit 1 that failure ejects the dead
// server. It gives up quietly after 200 keys, since nutcracker may already
// have ejected the server when its connection closed.
func provokeEjection(ctx context.Context, addr string, keys [][]byte) error {
	c, err := dialCtx(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for _, k := range keys[:200] {
		if _, err := fmt.Fprintf(c, "get %s\r\n", k); err != nil {
			return err
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			switch {
			case strings.HasPrefix(line, "SERVER_ERROR"):
				return nil
			case line == "END\r\n":
			case strings.HasPrefix(line, "VALUE "):
				var key string
				var flags, n int
				if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &key, &flags, &n); err != nil {
					return fmt.Errorf("reply %q: %v", line, err)
				}
				if _, err := io.CopyN(io.Discard, r, int64(n+2)); err != nil {
					return err
				}
				continue
			default:
				return fmt.Errorf("get %x: unexpected reply %q", k, line)
			}
			break
		}
	}
	return nil
}

// compareLive finds each key of c.value on the live servers and compares
// with pool.Pick.
func compareLive(ctx context.Context, t *testing.T, c *placementCase, pool *Pool, ks *keySet) {
	t.Helper()
	keys := ks.keys
	index := map[string]int{}
	for i, s := range pool.Servers() {
		index[s.Name] = i
	}
	where := make([]int, len(keys))
	for i := range where {
		where[i] = -1
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, len(c.servers))
	for _, s := range c.servers {
		i := index[s.node().Name]
		if !pool.Live()[i] {
			continue
		}
		wg.Go(func() {
			held, err := mcHolding(ctx, s.mc.network, s.mc.addr, ks, c.value)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, k := range held {
				where[k] = i
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	bad := 0
	for i, k := range keys {
		got, err := pool.Pick(k)
		if err != nil {
			t.Fatal(err)
		}
		if got != where[i] {
			if bad < 5 {
				t.Errorf("key %x: Pool picks %d, nutcracker used %d", k, got, where[i])
			}
			bad++
		}
	}
	var dead []string
	for i, s := range pool.Servers() {
		if !pool.Live()[i] {
			dead = append(dead, s.Name)
		}
	}
	slices.Sort(dead)
	t.Logf("ejected %v: %d of %d keys differ from nutcracker", dead, bad, len(keys))
}
