package admin_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// internalRoute answers every storage command from the Lua pool's own
// cache (mcp.internal).
const internalRoute = `
function mcp_config_pools() return {} end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r) return mcp.internal(r) end)
end
`

// reloadStep is one configuration of TestMetricsMonotonic: which
// memcached servers (by letter) each native pool has, and the settings a
// reload changes.
type reloadStep struct {
	mc, nc       string // servers of the plain pool and the near-cache pool; no nc: no such pool
	timeout      int    // mc's, rc's: a new value makes new backends
	nearMiB      int    // near_cache: a new size makes a new cache
	nearTTL      int    // near_cache_ttl: the same
	luaMiB       int    // lua_internal_cache: the same
	clusterEvery int    // cluster_refresh, ms
}

// TestMetricsMonotonic reloads a proxy under traffic, through
// configurations that add and remove servers, give servers new options
// (new backends under the same names), replace a near cache and a Lua
// pool's own cache, change a Redis Cluster pool's settings (every reload
// builds a new cluster router and Lua router), and remove a pool and add
// it back. Meanwhile it scrapes
// /metrics and the stats port as fast as it can, and fails if any
// counter, histogram bucket, _count or _sum, or stats port counter, is
// ever lower than in an earlier scrape.
func TestMetricsMonotonic(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs memcached and a Redis Cluster")
	}
	mcs := map[byte]string{}
	for _, l := range "ABCD" {
		mcs[byte(l)] = testserver.StartMemcached(t).Addr
	}
	rc := testserver.StartRedisCluster(t, 3, 0)
	dir := t.TempDir()
	luaFile := filepath.Join(dir, "routes.lua")
	if err := os.WriteFile(luaFile, []byte(internalRoute), 0o644); err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	for _, p := range []string{"mc", "nc", "lp", "rc"} {
		ports[p] = testserver.FreePort(t)
	}
	yaml := func(s reloadStep) string {
		var b strings.Builder
		servers := func(letters string) {
			b.WriteString("  servers:\n")
			for i := range len(letters) {
				fmt.Fprintf(&b, "    - %s:1 %c\n", mcs[letters[i]], letters[i])
			}
		}
		fmt.Fprintf(&b, "mc:\n  listen: 127.0.0.1:%d\n  timeout: %d\n", ports["mc"], s.timeout)
		servers(s.mc)
		if s.nc != "" {
			fmt.Fprintf(&b, "nc:\n  listen: 127.0.0.1:%d\n  timeout: 2000\n  near_cache: %d\n  near_cache_ttl: %d\n", ports["nc"], s.nearMiB, s.nearTTL)
			servers(s.nc)
		}
		fmt.Fprintf(&b, "lp:\n  listen: 127.0.0.1:%d\n  lua: %s\n  lua_internal_cache: %d\n", ports["lp"], luaFile, s.luaMiB)
		fmt.Fprintf(&b, "rc:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_cluster: true\n  timeout: %d\n  cluster_refresh: %d\n  servers:\n",
			ports["rc"], s.timeout, s.clusterEvery)
		for _, a := range rc.Addrs() {
			fmt.Fprintf(&b, "    - %s:1\n", a)
		}
		return b.String()
	}
	steps := []reloadStep{
		{mc: "AB", nc: "A", timeout: 2000, nearMiB: 1, nearTTL: 5, luaMiB: 1, clusterEvery: 1000},
		{mc: "ABC", nc: "A", timeout: 1500, nearMiB: 2, nearTTL: 5, luaMiB: 2, clusterEvery: 500},
		{mc: "BC", nc: "B", timeout: 1500, nearMiB: 2, nearTTL: 7, luaMiB: 1, clusterEvery: 500},
		{mc: "ACD", nc: "AB", timeout: 1000, nearMiB: 1, nearTTL: 7, luaMiB: 1, clusterEvery: 700},
		{mc: "D", nc: "C", timeout: 1000, nearMiB: 1, nearTTL: 3, luaMiB: 2, clusterEvery: 700},
		{mc: "D", nc: "", timeout: 1000, luaMiB: 2, clusterEvery: 700},
		{mc: "AB", nc: "A", timeout: 2000, nearMiB: 2, nearTTL: 5, luaMiB: 1, clusterEvery: 1000},
	}
	path := filepath.Join(dir, "conf.yml")
	srv := startProxy(t, writeConfig(t, path, yaml(steps[0])))
	web := startHTTP(t, srv)
	stats := startStats(t, srv, 10*time.Millisecond)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var ops atomic.Int64
	for _, p := range []string{"mc", "nc", "lp"} {
		wg.Add(1)
		go func() { defer wg.Done(); mcLoad(addrOf(ports[p]), stop, &ops) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); redisLoad(addrOf(ports["rc"]), stop, &ops) }()

	// Reload on another goroutine; scrape on this one, as fast as it
	// can, until the reloads are done and the last backends drained.
	reloaded := make(chan error, 1)
	go func() {
		for i, s := range append(steps[1:], steps...) {
			time.Sleep(300 * time.Millisecond) // traffic on this configuration
			if err := os.WriteFile(path, []byte(yaml(s)), 0o644); err != nil {
				reloaded <- err
				return
			}
			cfg, err := config.Load(path)
			if err == nil {
				err = srv.Reload(cfg)
			}
			if err != nil {
				reloaded <- fmt.Errorf("reload %d: %w", i+1, err)
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
		reloaded <- nil
	}()
	mono := newMonotone()
	scrapes := 0
	scrape := func() {
		mono.metrics(families(t, httpBody(t, "http://"+web.Addr().String()+"/metrics")))
		mono.stats(statsDoc(t, readStats(t, stats.Addr().String())))
		scrapes++
	}
	for done := false; !done; {
		select {
		case err := <-reloaded:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		default:
			scrape()
		}
	}
	close(stop)
	wg.Wait()
	scrape()
	t.Logf("%d reloads, %d requests, %d scrapes of /metrics and the stats port, %d series watched",
		2*len(steps)-1, ops.Load(), scrapes, len(mono.last))
	if ops.Load() < 100 || scrapes < 20 {
		t.Fatalf("too little traffic (%d requests) or too few scrapes (%d) to tell", ops.Load(), scrapes)
	}
	mono.report(t)
	// The series the issue named: the pool latency histogram.
	if mono.last[`shardproxy_pool_latency_seconds_count{pool="mc"}`] == 0 {
		t.Error("the mc pool's latency histogram never counted")
	}
}

func addrOf(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// monotone remembers every counter's last value and collects decreases.
type monotone struct {
	mu    sync.Mutex
	last  map[string]float64
	drops []string        // the first few, in full
	names map[string]bool // every series name that went backwards
}

func newMonotone() *monotone { return &monotone{last: map[string]float64{}, names: map[string]bool{}} }

func (m *monotone) see(key string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.last[key]; ok && v < old {
		if len(m.drops) < 10 {
			m.drops = append(m.drops, fmt.Sprintf("%s went from %v to %v", key, old, v))
		}
		name, _, _ := strings.Cut(key, "{")
		m.names[name] = true
	}
	m.last[key] = v
}

// metrics sees every counter and every histogram's buckets, _count and
// _sum.
func (m *monotone) metrics(fams map[string]*dto.MetricFamily) {
	for name, f := range fams {
		for _, s := range f.Metric {
			key := name + labelText(s.Label)
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				m.see(key, s.Counter.GetValue())
			case dto.MetricType_HISTOGRAM:
				h := s.Histogram
				m.see(name+"_count"+labelText(s.Label), float64(h.GetSampleCount()))
				m.see(name+"_sum"+labelText(s.Label), h.GetSampleSum())
				for _, b := range h.Bucket {
					m.see(fmt.Sprintf("%s_bucket%s{le=%g}", name, labelText(s.Label), b.GetUpperBound()), float64(b.GetCumulativeCount()))
				}
			}
		}
	}
}

// statsCounters are the stats port's counters (not gauges, not times).
var statsCounters = map[string]bool{
	"total_connections": true,
	"client_eof":        true, "client_err": true, "server_ejects": true, "forward_error": true, "fragments": true,
	"server_eof": true, "server_err": true, "server_timedout": true, "requests": true, "request_bytes": true,
	"responses": true, "response_bytes": true, "ejects": true,
	"moved": true, "ask": true, "tryagain": true, "slot_map_refreshes": true, "slot_map_refresh_failures": true,
}

// stats sees the stats port's counters, at any depth.
func (m *monotone) stats(doc map[string]any) {
	var walk func(prefix string, o map[string]any)
	walk = func(prefix string, o map[string]any) {
		for k, v := range o {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+"/", v)
			case float64:
				if statsCounters[k] {
					m.see("stats:"+prefix+k, v)
				}
			}
		}
	}
	walk("", doc)
}

func (m *monotone) report(t *testing.T) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range m.drops {
		t.Error(d)
	}
	if len(m.names) > 0 {
		var names []string
		for n := range m.names {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Errorf("these went backwards: %s", strings.Join(names, " "))
	}
}

func labelText(ls []*dto.LabelPair) string {
	var parts []string
	for _, l := range ls {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

// load sets and gets keys through the proxy at addr until stop closes,
// redialling after any error (a reload may close nothing, but the test
// does not judge replies). pair sends one set and one get of key and
// reads both replies; it returns false when the connection is no good.
func load(addr string, stop <-chan struct{}, ops *atomic.Int64, pair func(nc net.Conn, r *bufio.Reader, key string) bool) {
	for i := 0; ; {
		nc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				continue
			}
		}
		r := bufio.NewReader(nc)
		for ; ; i++ {
			select {
			case <-stop:
				nc.Close()
				return
			default:
			}
			nc.SetDeadline(time.Now().Add(5 * time.Second))
			if !pair(nc, r, "k"+strconv.Itoa(i%200)) {
				break
			}
			ops.Add(2)
		}
		nc.Close()
	}
}

// mcLoad sets and gets keys on a memcached pool until stop closes.
func mcLoad(addr string, stop <-chan struct{}, ops *atomic.Int64) {
	load(addr, stop, ops, func(nc net.Conn, r *bufio.Reader, key string) bool {
		if _, err := fmt.Fprintf(nc, "set %s 0 0 1\r\nv\r\nget %s\r\n", key, key); err != nil {
			return false
		}
		return readUntil(r, "STORED", "SERVER_ERROR", "ERROR") && readUntil(r, "END", "SERVER_ERROR", "ERROR")
	})
}

// readUntil reads lines until one starts with an end word.
func readUntil(r *bufio.Reader, ends ...string) bool {
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		for _, e := range ends {
			if strings.HasPrefix(l, e) {
				return true
			}
		}
	}
}

// redisLoad sets and gets keys through a Redis pool until stop closes.
func redisLoad(addr string, stop <-chan struct{}, ops *atomic.Int64) {
	load(addr, stop, ops, func(nc net.Conn, r *bufio.Reader, key string) bool {
		if _, err := fmt.Fprintf(nc, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n",
			len(key), key, len(key), key); err != nil {
			return false
		}
		if _, err := readRESP(r); err != nil {
			return false
		}
		_, err := readRESP(r)
		return err == nil
	})
}

// readRESP reads one simple, error, integer or bulk reply.
func readRESP(r *bufio.Reader) (string, error) {
	l, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(l) > 0 && l[0] == '$' {
		n, _ := strconv.Atoi(strings.TrimSpace(l[1:]))
		if n < 0 {
			return l, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return "", err
		}
		return l + string(b), nil
	}
	return l, nil
}
