package proxy_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// bigConfig is 100 pools of 100 servers each. The servers need not exist:
// nothing dials them until a request comes.
func bigConfig(t testing.TB, ports []int, timeout int) *config.Config {
	var b strings.Builder
	for p, port := range ports {
		fmt.Fprintf(&b, "pool%d:\n  listen: 127.0.0.1:%d\n  timeout: %d\n  servers:\n", p, port, timeout)
		for s := range 100 {
			fmt.Fprintf(&b, "    - 10.%d.%d.1:11211:1\n", p, s)
		}
	}
	cfg, err := config.Parse([]byte(b.String()), "big.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// BenchmarkReload100x100 reloads 100 pools x 100 servers: the same config
// (listeners and backends kept) and a changed timeout (every backend new).
func BenchmarkReload100x100(b *testing.B) {
	ports := make([]int, 100)
	for i := range ports {
		ports[i] = testserver.FreePort(b)
	}
	same, changed := bigConfig(b, ports, 400), bigConfig(b, ports, 500)
	srv, _ := startProxyCfg(b, same)
	for _, tc := range []struct {
		name string
		next func(i int) *config.Config
	}{
		{"unchanged", func(int) *config.Config { return same }},
		{"new_timeout", func(i int) *config.Config {
			if i%2 == 0 {
				return changed
			}
			return same
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if err := srv.Reload(tc.next(i)); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms/reload")
		})
	}
}

// BenchmarkStats100x100 takes the counters of 100 pools x 100 servers, as
// every scrape of /metrics and every stats port aggregation does.
func BenchmarkStats100x100(b *testing.B) {
	ports := make([]int, 100)
	for i := range ports {
		ports[i] = testserver.FreePort(b)
	}
	srv, _ := startProxyCfg(b, bigConfig(b, ports, 400))
	b.ReportAllocs()
	for b.Loop() {
		if st := srv.Stats(); len(st.Pools) != 100 {
			b.Fatalf("%d pools", len(st.Pools))
		}
	}
}
