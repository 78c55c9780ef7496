package main

import (
	"context"
	"errors"
	"fmt"
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
// and at most the requests it had in flight.
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
	t.Logf("requests per proxy before the restart %v; answered %d, wrong %d, failed %d (first: %v)",
		per, ok.Load(), wrong.Load(), failed.Load(), firstBad.Load())
	if wrong.Load() > 0 || failed.Load() > 20 {
		again.fail("answered %d, wrong %d, failed %d (at most one per client, in flight at the restart): %v",
			ok.Load(), wrong.Load(), failed.Load(), firstBad.Load())
	}
}
