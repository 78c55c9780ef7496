package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/testserver"
)

// TestFleetClusterView runs three proxies of a fleet whose Redis pool has
// redis_cluster_view, and go-redis's ClusterClient pointed at the first:
// the map lists the three, each serving a third of the slots; the
// client's verified load reaches all three; one proxy restarted under the
// load (SIGTERM, then the same id and address again) costs no wrong reply,
// and at most the requests it had in flight. redis-py's RedisCluster runs
// a verified load of its own beside it (testdata/clients/redis_cluster_load.py):
// one that must reach all three before the restart, and one through it
// with no wrong reply. (redis-py 4.3 reads the map again only after an
// error: if it read it while the restarted proxy was away, the other two
// serve that proxy's slots until then, so its spread through the restart
// is not asserted.)
func TestFleetClusterView(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, redis-server and the binary")
	}
	eps := testserver.StartEtcd(t, 1).Endpoints()
	port := testserver.FreePort(t)
	yml := fmt.Sprintf("rd:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_cluster_view: true\n  timeout: 2000\n"+
		"  servers:\n    - %s:1 r1\n    - %s:1 r2\n", port, testserver.StartRedis(t).Addr, testserver.StartRedis(t).Addr)
	rev := fleetPut(t, eps, yml)
	proxies := startFleetProxies(t, eps, 3, port)
	waitApplied(t, eps, proxies, rev, time.Now(), 30*time.Second)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{proxies[0].addr}, MaxRedirects: 8})
	defer cc.Close()
	waitFor(t, proxies[0].fail, "a map of the three proxies", func() bool {
		slots, err := cc.ClusterSlots(ctx).Result()
		return err == nil && len(slots) == 3
	})
	slots, _ := cc.ClusterSlots(ctx).Result()
	for i, s := range slots {
		first, last := i*16384/3, (i+1)*16384/3-1
		if s.Start != first || s.End != last || len(s.Nodes) != 1 || s.Nodes[0].Addr != proxies[i].addr {
			proxies[0].fail("slots %d: %+v, want %d-%d at %s", i, s, first, last, proxies[i].addr)
		}
	}

	spread := startRedisPyLoad(t, proxies[0].addr)

	var ok, wrong, failed atomic.Int64
	var firstBad atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("w%d-k%d", w, seq%200), strconv.Itoa(seq)
				if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
					failed.Add(1)
					firstBad.CompareAndSwap(nil, "SET "+k+": "+err.Error())
					continue
				}
				got, err := cc.Get(ctx, k).Result()
				switch {
				case err != nil && !errors.Is(err, redis.Nil):
					failed.Add(1)
					firstBad.CompareAndSwap(nil, "GET "+k+": "+err.Error())
				case got != v:
					wrong.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("GET %s: %q, want %q", k, got, v))
				default:
					ok.Add(1)
				}
			}
		}()
	}
	requests := func(p *fleetProxy) int64 { return metric(p, `shardproxy_pool_requests_total{pool="rd"}`) }
	waitFor(t, proxies[0].fail, "requests at every proxy", func() bool {
		return requests(proxies[0]) > 500 && requests(proxies[1]) > 500 && requests(proxies[2]) > 500
	})
	per := []int64{requests(proxies[0]), requests(proxies[1]), requests(proxies[2])}
	spread.check(t, proxies)
	through := startRedisPyLoad(t, proxies[0].addr)
	time.Sleep(200 * time.Millisecond) // it has read the map of three

	// Restart the second proxy under the load.
	if err := proxies[1].stop(); err != nil {
		proxies[1].fail("stop: %v", err)
	}
	host, _, _ := strings.Cut(proxies[1].addr, ":")
	again := startFleetProxy(t, eps, proxies[1].id, host, port)
	waitFor(t, again.fail, "the restarted proxy serving its slots", func() bool { return requests(again) > 500 })
	from := ok.Load()
	waitFor(t, again.fail, "more requests answered", func() bool { return ok.Load() > from+2000 })
	close(stop)
	wg.Wait()
	through.check(t, nil)
	t.Logf("requests per proxy before the restart %v; answered %d, wrong %d, failed %d (first: %v)",
		per, ok.Load(), wrong.Load(), failed.Load(), firstBad.Load())
	if wrong.Load() > 0 || failed.Load() > 20 {
		again.fail("answered %d, wrong %d, failed %d (at most one per client, in flight at the restart): %v",
			ok.Load(), wrong.Load(), failed.Load(), firstBad.Load())
	}
}

// redisPyLoad is redis_cluster_load.py running against a fleet.
type redisPyLoad struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	stop string
}

// startRedisPyLoad starts redis-py's RedisCluster's verified load through
// addr; nil when python3 or redis-py is missing (make deps installs
// python3-redis).
func startRedisPyLoad(t *testing.T, addr string) *redisPyLoad {
	python := "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import redis.cluster").Run(); err != nil {
		t.Logf("redis-py not installed (apt-get install python3-redis, make deps): its load is not run")
		return nil
	}
	host, port, _ := strings.Cut(addr, ":")
	l := &redisPyLoad{out: new(bytes.Buffer), stop: filepath.Join(t.TempDir(), "stop")}
	l.cmd = exec.Command(python, "testdata/clients/redis_cluster_load.py", host, port, l.stop, "py", "600")
	l.cmd.Stdout, l.cmd.Stderr = l.out, l.out
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cmd.Process.Kill() })
	return l
}

// check stops the load and fails the test on a wrong reply, on more
// failed requests than one restart has in flight, or on a proxy of
// spreadOver the client sent less than a tenth of its requests to.
func (l *redisPyLoad) check(t *testing.T, spreadOver []*fleetProxy) {
	if l == nil {
		return
	}
	if err := os.WriteFile(l.stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("redis-py load: %v\n%s", err, l.out)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("redis-py load did not stop\n%s", l.out)
	}
	var res struct {
		OK, Wrong, Failed int
		First             *string
		Nodes             map[string]int
	}
	lines := strings.Split(strings.TrimSpace(l.out.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("redis-py load's output: %v\n%s", err, l.out)
	}
	t.Logf("redis-py RedisCluster: answered %d, wrong %d, failed %d (first: %v), per node %v",
		res.OK, res.Wrong, res.Failed, res.First, res.Nodes)
	if res.Wrong > 0 || res.Failed > 5 || res.OK < 600 {
		t.Errorf("redis-py RedisCluster: answered %d, wrong %d, failed %d (first: %v)", res.OK, res.Wrong, res.Failed, res.First)
	}
	for _, p := range spreadOver {
		if res.Nodes[p.addr] < res.OK/10 {
			t.Errorf("redis-py RedisCluster sent %d of %d requests to %s: %v", res.Nodes[p.addr], res.OK, p.addr, res.Nodes)
		}
	}
}
