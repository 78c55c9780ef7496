package admin_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// startObserved runs a proxy with one memcache pool "mc" over a real
// memcached (behind fp when it is given) with extra pool keys, and its
// admin HTTP server; it returns both and the pool's address.
func startObserved(t *testing.T, extra string, behind func(addr string) string) (*proxy.Server, string, string) {
	t.Helper()
	mcd := testserver.StartMemcached(t)
	addr := mcd.Addr
	if behind != nil {
		addr = behind(addr)
	}
	yaml := strings.Replace(mcYAML("127.0.0.1:0", extra, addr), ":1\n", ":1 s1\n", 1)
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv := startProxy(t, cfg)
	web := startHTTP(t, srv)
	return srv, srv.Addr("mc").String(), "http://" + web.Addr().String()
}

// pipeline sends n gets of keys made by key(i) in batches of depth on one
// connection and reads every reply (END for a miss).
func pipeline(t *testing.T, addr string, n, depth int, key func(i int) string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for i := 0; i < n; i += depth {
		var b strings.Builder
		for j := i; j < min(i+depth, n); j++ {
			fmt.Fprintf(&b, "get %s\r\n", key(j))
		}
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(nc, b.String()); err != nil {
			t.Fatal(err)
		}
		for j := i; j < min(i+depth, n); j++ {
			if l, err := r.ReadString('\n'); err != nil || l != "END\r\n" {
				t.Fatalf("get %s: %q %v", key(j), l, err)
			}
		}
	}
}

// TestTapKeyPattern: GET /tap?key= streams the requests whose key
// matches, under a load of others, a line each in redis-cli monitor's
// manner.
func TestTapKeyPattern(t *testing.T) {
	srv, addr, web := startObserved(t, "", nil)
	resp, err := http.Get(web + "/tap?pool=mc&key=user:*")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /tap: %s", resp.Status)
	}
	eventually(t, "the subscriber", func() bool { return srv.Stats().Tap.Subscribers == 1 })
	lines := make(chan string, 100)
	go func() {
		r := bufio.NewReader(resp.Body)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- l
		}
	}()
	pipeline(t, addr, 5000, 50, func(i int) string {
		if i%500 == 7 {
			return fmt.Sprintf("user:%d", i)
		}
		return fmt.Sprintf("other:%d", i)
	})
	for i := 7; i < 5000; i += 500 {
		select {
		case l := <-lines:
			want := fmt.Sprintf(`"get" "user:%d" backend=s1 `, i)
			if !strings.Contains(l, want) || !strings.Contains(l, " [mc 127.0.0.1:") || !strings.HasSuffix(l, " result=miss\n") {
				t.Fatalf("line %q, want one with %q", l, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line for user:%d", i)
		}
	}
	select {
	case l := <-lines:
		t.Fatalf("a line past the matching requests: %q", l)
	case <-time.After(100 * time.Millisecond):
	}
}

// TestTapSlowReader: a tap client that stops reading costs the proxy
// nothing once its buffer is full: every request is still answered and
// the drop counter grows.
func TestTapSlowReader(t *testing.T) {
	srv, addr, web := startObserved(t, "", nil)
	nc, err := net.Dial("tcp", strings.TrimPrefix(web, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "GET /tap HTTP/1.1\r\nHost: proxy\r\n\r\n") // and never read
	eventually(t, "the subscriber", func() bool { return srv.Stats().Tap.Subscribers == 1 })
	key := func(i int) string { return fmt.Sprintf("k%d", i) }
	deadline := time.Now().Add(30 * time.Second)
	for srv.Stats().Tap.Dropped == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no line dropped after 30s: %+v", srv.Stats().Tap)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); pipeline(t, addr, 20000, 100, key) }()
		}
		wg.Wait()
	}
	before := srv.Stats().Tap
	pipeline(t, addr, 20000, 100, key) // served in full, the tap still stuck
	after := srv.Stats().Tap
	t.Logf("tap before %+v, after %+v", before, after)
	if after.Dropped < before.Dropped+20000 {
		t.Errorf("dropped %d then %d: the stuck reader should lose all 20000 lines", before.Dropped, after.Dropped)
	}
	if m := httpBody(t, web+"/metrics"); !strings.Contains(m, "shardproxy_tap_dropped_total ") {
		t.Error("no shardproxy_tap_dropped_total in /metrics")
	}
}

// TestSlowlogEndpoint: GET /slowlog shows a slow request with the
// server that took the time; POST /slowlog/reset empties it.
func TestSlowlogEndpoint(t *testing.T) {
	var fp *faultproxy.Proxy
	srv, addr, web := startObserved(t, "  slowlog_threshold: 15\n", func(a string) string {
		fp = faultproxy.New(t, a)
		return fp.Addr()
	})
	pipeline(t, addr, 1, 1, func(int) string { return "warm" })
	srv.ResetSlowlog("") // the warm get's dial may have been slow
	fp.Latency(faultproxy.Downstream, 30*time.Millisecond, 0)
	pipeline(t, addr, 1, 1, func(int) string { return "user:42" })
	var reply struct {
		Pools []struct {
			Pool        string `json:"pool"`
			ThresholdUS int64  `json:"threshold_us"`
			Entries     []struct {
				Command, Key, Backend, Result string
				US                            int64 `json:"us"`
				ServerUS                      int64 `json:"server_us"`
			} `json:"entries"`
		} `json:"pools"`
	}
	if err := json.Unmarshal([]byte(httpBody(t, web+"/slowlog")), &reply); err != nil {
		t.Fatal(err)
	}
	if len(reply.Pools) != 1 || reply.Pools[0].ThresholdUS != 15000 || len(reply.Pools[0].Entries) != 1 {
		t.Fatalf("GET /slowlog: %+v", reply)
	}
	e := reply.Pools[0].Entries[0]
	if e.Command != "get" || e.Key != "user:42" || e.Backend != "s1" || e.Result != "miss" || e.ServerUS < 29000 || e.US < e.ServerUS {
		t.Errorf("entry %+v", e)
	}
	// The two gets in the command's histogram, the slow one above 25ms;
	// the slowlog counted it.
	m := httpBody(t, web+"/metrics")
	if !strings.Contains(m, `shardproxy_command_latency_seconds_count{command="get",pool="mc"} 2`+"\n") ||
		strings.Contains(m, `shardproxy_command_latency_seconds_bucket{command="get",pool="mc",le="0.025"} 2`+"\n") {
		t.Errorf("/metrics has not the two gets, one over 25ms:\n%s", grepLines(m, "command_latency"))
	}
	if strings.Contains(m, `shardproxy_slow_requests_total{pool="mc"} 0`+"\n") || !strings.Contains(m, `shardproxy_slow_requests_total{pool="mc"} `) {
		t.Errorf("/metrics: %s", grepLines(m, "slow_requests"))
	}
	resp, err := http.Post(web+"/slowlog/reset?pool=mc", "", nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /slowlog/reset: %v %v", resp, err)
	}
	resp.Body.Close()
	if b := httpBody(t, web+"/slowlog?pool=mc"); !strings.Contains(b, `"entries": []`) {
		t.Errorf("after the reset: %s", b)
	}
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestHotKeysZipf: under Zipf load over a million keys with one key
// taking 30% of the requests, the pool reports that key first within a
// second, in its stats, "stats hotkeys" and /metrics.
func TestHotKeysZipf(t *testing.T) {
	srv, addr, web := startObserved(t, "  hot_keys: 5\n", nil)
	z := rand.NewZipf(rand.New(rand.NewPCG(7, 8)), 1.1, 1, 1_000_000)
	keys := make([]string, 50_000)
	for i := range keys {
		keys[i] = "k" + strconv.FormatUint(z.Uint64(), 10)
		if i%10 < 3 {
			keys[i] = "hot"
		}
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); pipeline(t, addr, len(keys), 100, func(i int) string { return keys[i] }) }()
	found := time.Duration(-1)
	for found < 0 && time.Since(start) < 5*time.Second {
		if hk := srv.Stats().Pools[0].HotKeys; len(hk) > 0 && hk[0].Key == "hot" {
			found = time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-done
	t.Logf("the hot key reported first %v after the load began", found)
	if found < 0 || found > time.Second {
		t.Fatalf("the hot key was first after %v: %+v", found, srv.Stats().Pools[0].HotKeys)
	}
	hk := srv.Stats().Pools[0].HotKeys
	if len(hk) != 5 || hk[0].Requests < 15_000 || hk[1].Requests > hk[0].Requests/2 {
		t.Errorf("hot keys %+v", hk)
	}
	c := dialMC(t, addr)
	if got := c.do("stats hotkeys\r\n", "END"); !strings.Contains(got, "STAT hotkeys_window_seconds 10\r\nSTAT 1 key=hot requests=") {
		t.Errorf("stats hotkeys:\n%s", got)
	}
	if m := httpBody(t, web+"/metrics"); !strings.Contains(m, `shardproxy_hot_key_requests{key="hot",pool="mc"} `) {
		t.Errorf("/metrics: %s", grepLines(m, "hot_key"))
	}
}
