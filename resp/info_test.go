package resp

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// testdata/info holds INFO everything as two redis-server 7.0.15 wrote it.
func readInfo(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/info/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func bulkReply(text string) codec.Reply {
	return codec.Reply{Raw: redcon.AppendBulkString(nil, text), Kind: codec.ReplyOK}
}

// infoRequest parses INFO args with ServerInfo set and, when it asks for
// the Proxy section, adds the lines of env.
func infoRequest(t *testing.T, env codec.Env, args ...string) *codec.Request {
	t.Helper()
	return infoRequestWith(t, codec.Options{ServerInfo: true}, env, args...)
}

// infoRequestWith is infoRequest from a parser with o.
func infoRequestWith(t *testing.T, o codec.Options, env codec.Env, args ...string) *codec.Request {
	t.Helper()
	p := dialect.NewRequestParser(o)
	req := &codec.Request{}
	if _, err := p.ParseRequest([]byte(mb(append([]string{"INFO"}, args...)...)), req); err != nil {
		t.Fatal(err)
	}
	if req.WithLocal {
		dialect.AddLocal(req, env)
	}
	return req
}

// mergedInfo merges replies to INFO args and returns the bulk's text.
func mergedInfo(t *testing.T, req *codec.Request, replies ...codec.Reply) string {
	t.Helper()
	out := dialect.Merge(nil, req, nil, nil, replies)
	n, v := redcon.ReadNextRESP(out)
	if n != len(out) || v.Type != redcon.Bulk {
		t.Fatalf("merged INFO is not one bulk string: %q", out)
	}
	return string(v.Data)
}

// field returns the value of key in section of an INFO text, parsed as a
// client library does (key:value lines under "# Section" headers).
func field(text, section, key string) (string, bool) {
	in := ""
	for _, line := range strings.Split(text, "\r\n") {
		if name, ok := strings.CutPrefix(line, "# "); ok {
			in = name
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && in == section && k == key {
			return v, true
		}
	}
	return "", false
}

func TestInfoRoundTrip(t *testing.T) {
	for _, name := range []string{"everything_a.txt", "everything_b.txt"} {
		text := readInfo(t, name)
		if got := string(appendSections(nil, parseInfo([]byte(text)))); got != text {
			t.Errorf("%s: parse and write changed it:\n%q\n%q", name, got, text)
		}
	}
}

func TestInfoRoute(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		options   codec.Options
		route     codec.Route
		wantProxy bool
	}{
		{nil, codec.Options{}, codec.RouteLocal, false},
		{[]string{"server"}, codec.Options{}, codec.RouteLocal, false},
		{nil, codec.Options{ServerInfo: true}, codec.RouteAll, true},
		{[]string{"server"}, codec.Options{ServerInfo: true}, codec.RouteAll, false},
		{[]string{"server", "keyspace"}, codec.Options{ServerInfo: true}, codec.RouteAll, false},
		{[]string{"ALL"}, codec.Options{ServerInfo: true}, codec.RouteAll, true},
		{[]string{"everything"}, codec.Options{ServerInfo: true}, codec.RouteAll, true},
		{[]string{"Default"}, codec.Options{ServerInfo: true}, codec.RouteAll, true},
		{[]string{"keyspace", "proxy"}, codec.Options{ServerInfo: true}, codec.RouteAll, true},
		{[]string{"proxy"}, codec.Options{ServerInfo: true}, codec.RouteLocal, false},
		{[]string{"PROXY", "proxy"}, codec.Options{ServerInfo: true}, codec.RouteLocal, false},
	} {
		p := dialect.NewRequestParser(tc.options)
		req := &codec.Request{}
		if _, err := p.ParseRequest([]byte(mb(append([]string{"INFO"}, tc.args...)...)), req); err != nil {
			t.Fatal(err)
		}
		if req.Route != tc.route || req.WithLocal != (tc.route == codec.RouteAll) ||
			(req.Arg == infoProxyWanted) != tc.wantProxy {
			t.Errorf("INFO %v with %+v: route %d, local %t, arg %d", tc.args, tc.options, req.Route, req.WithLocal, req.Arg)
		}
	}
}

type infoEnv struct{}

func (infoEnv) Version() string { return "9.9.9" }
func (infoEnv) Stats() []codec.Stat {
	return []codec.Stat{{Name: "requests", Value: "12"}, {Name: "pool", Value: "a:b\r\nc"}}
}

func TestInfoMerge(t *testing.T) {
	a, b := readInfo(t, "everything_a.txt"), readInfo(t, "everything_b.txt")
	older := strings.Replace(b, "redis_version:7.0.15", "redis_version:6.2.14", 1)
	older = strings.Replace(older, "process_id:", "process_id:9", 1)
	req := infoRequest(t, infoEnv{}, "everything")
	got := mergedInfo(t, req, bulkReply(a), bulkReply(older), bulkReply(a))

	// Server: from the oldest server, uptime the youngest's.
	if v, _ := field(got, "Server", "redis_version"); v != "6.2.14" {
		t.Errorf("redis_version %q, want the lowest", v)
	}
	if v, _ := field(older, "Server", "process_id"); !strings.Contains(got, "process_id:"+v+"\r\n") {
		t.Errorf("process_id is not the oldest server's %s", v)
	}
	up := func(text string) int64 {
		v, _ := field(text, "Server", "uptime_in_seconds")
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	if want := min(up(a), up(older)); up(got) != want || up(a) == up(older) {
		t.Errorf("uptime_in_seconds %d, want %d, the lower of %d and %d", up(got), want, up(a), up(older))
	}
	// Sums, maxima, recomputed human sizes.
	sum := func(section, key string, texts ...string) int64 {
		var n int64
		for _, tx := range texts {
			v, ok := field(tx, section, key)
			if !ok {
				t.Fatalf("%s has no %s", section, key)
			}
			i, ok := parseInt([]byte(v))
			if !ok {
				t.Fatalf("%s %s=%q", section, key, v)
			}
			n += i
		}
		return n
	}
	for _, f := range [][2]string{{"Clients", "connected_clients"}, {"Memory", "used_memory"}, {"Stats", "total_commands_processed"}, {"Clients", "maxclients"}} {
		if v, _ := field(got, f[0], f[1]); v != itoa(sum(f[0], f[1], a, b, a)) {
			t.Errorf("%s %s = %s, want %d", f[0], f[1], v, sum(f[0], f[1], a, b, a))
		}
	}
	if v, _ := field(got, "Memory", "used_memory_human"); v != bytesToHuman(sum("Memory", "used_memory", a, b, a)) {
		t.Errorf("used_memory_human %s", v)
	}
	if v, _ := field(got, "Memory", "maxmemory"); v != "0" {
		t.Errorf("maxmemory %s, want 0 (no limit)", v)
	}
	if v, _ := field(got, "Memory", "mem_allocator"); v != "jemalloc-5.3.0" {
		t.Errorf("mem_allocator %s", v)
	}
	if v, _ := field(got, "Cluster", "cluster_enabled"); v != "0" {
		t.Errorf("cluster_enabled %s", v)
	}
	// A pool with redis_cluster_view answers as a cluster node: redis-py's
	// RedisCluster reads cluster_enabled before it asks CLUSTER SLOTS.
	viewReq := infoRequestWith(t, codec.Options{ServerInfo: true, ClusterView: true}, infoEnv{}, "everything")
	if v, _ := field(mergedInfo(t, viewReq, bulkReply(a), bulkReply(b)), "Cluster", "cluster_enabled"); v != "1" {
		t.Errorf("cluster view: cluster_enabled %s, want 1", v)
	}
	// Keyspace per database; the proxy's section last.
	if n, want := keysOf(t, got), 2*keysOf(t, a)+keysOf(t, b); n != want {
		t.Errorf("db0 keys=%d, want %d", n, want)
	}
	if !strings.HasSuffix(got, "\r\n\r\n# Proxy\r\nrequests:12\r\npool:a:b  c\r\ninfo_servers:3\r\ninfo_servers_answered:3\r\n") {
		t.Errorf("Proxy section:\n%s", got[max(0, len(got)-200):])
	}
	var headers []string
	for _, line := range strings.Split(got, "\r\n") {
		if strings.HasPrefix(line, "# ") {
			headers = append(headers, line[2:])
		}
	}
	if h := strings.Join(headers, " "); h != "Server Clients Memory Persistence Stats Replication CPU Modules Commandstats Errorstats Latencystats Cluster Keyspace Proxy" {
		t.Errorf("sections: %s", h)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// keysOf returns db0's keys in an INFO text.
func keysOf(t *testing.T, text string) int64 {
	t.Helper()
	v, _ := field(text, "Keyspace", "db0")
	for _, sf := range parseSubs(v) {
		if sf.name == "keys" {
			n, _ := strconv.ParseInt(sf.value, 10, 64)
			return n
		}
	}
	t.Fatalf("no db0 keys in %q", v)
	return 0
}

func TestInfoMergeFields(t *testing.T) {
	one := "# Keyspace\r\ndb0:keys=10,expires=2,avg_ttl=1000\r\ndb3:keys=1,expires=0,avg_ttl=0\r\n"
	two := "# Keyspace\r\ndb10:keys=5,expires=0,avg_ttl=0\r\ndb0:keys=20,expires=6,avg_ttl=3000\r\n"
	req := infoRequest(t, nil, "keyspace")
	got := mergedInfo(t, req, bulkReply(one), bulkReply(two))
	want := "# Keyspace\r\ndb0:keys=30,expires=8,avg_ttl=2500\r\ndb3:keys=1,expires=0,avg_ttl=0\r\ndb10:keys=5,expires=0,avg_ttl=0\r\n"
	if got != want {
		t.Errorf("keyspace:\n%q\nwant\n%q", got, want)
	}

	one = "# Commandstats\r\ncmdstat_get:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=1\r\n" +
		"\r\n# Latencystats\r\nlatency_percentiles_usec_get:p50=1.003,p99=9.000,p99.9=9.000\r\n" +
		"\r\n# Memory\r\nused_memory:1000\r\nused_memory_human:1000B\r\nmaxmemory:100\r\nmem_fragmentation_ratio:1.50\r\nused_memory_peak_perc:90.00%\r\n" +
		"\r\n# Persistence\r\nloading:0\r\nrdb_last_bgsave_status:ok\r\nrdb_last_save_time:200\r\n" +
		"\r\n# CPU\r\nused_cpu_sys:0.5\r\n"
	two = "# Commandstats\r\ncmdstat_get:calls=1,usec=10,usec_per_call=10.00,rejected_calls=2,failed_calls=0\r\n" +
		"\r\n# Latencystats\r\nlatency_percentiles_usec_get:p50=2.001,p99=3.000,p99.9=12.000\r\n" +
		"\r\n# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:200\r\nmem_fragmentation_ratio:3.25\r\nused_memory_peak_perc:99.10%\r\n" +
		"\r\n# Persistence\r\nloading:1\r\nrdb_last_bgsave_status:err\r\nrdb_last_save_time:100\r\n" +
		"\r\n# CPU\r\nused_cpu_sys:0.250000\r\n"
	got = mergedInfo(t, infoRequest(t, nil, "all"), bulkReply(one), bulkReply(two))
	for _, w := range []string{
		"cmdstat_get:calls=4,usec=40,usec_per_call=10.00,rejected_calls=2,failed_calls=1\r\n",
		"latency_percentiles_usec_get:p50=2.001,p99=9.000,p99.9=12.000\r\n",
		"used_memory:1049576\r\nused_memory_human:1.00M\r\nmaxmemory:300\r\nmem_fragmentation_ratio:3.25\r\nused_memory_peak_perc:99.10%\r\n",
		"loading:1\r\nrdb_last_bgsave_status:err\r\nrdb_last_save_time:100\r\n",
		"used_cpu_sys:0.750000\r\n",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("merged INFO lacks %q:\n%s", w, got)
		}
	}
}

func TestInfoMergeFailures(t *testing.T) {
	a := "# Server\r\nredis_version:7.0.15\r\n"
	down := codec.Reply{Err: errors.New("backend failure: connecting"), Server: "s2"}
	loading := codec.Reply{Raw: []byte("-LOADING Redis is loading the dataset in memory\r\n"), Kind: codec.ReplyFailure, Server: "10.0.0.3:6379"}
	ok := bulkReply(a)
	ok.Server = "s1"

	got := mergedInfo(t, infoRequest(t, nil, "server"), ok, down, loading)
	want := a + "\r\n# Proxy\r\ninfo_servers:3\r\ninfo_servers_answered:1\r\n" +
		"info_failed0:server=s2,error=backend failure: connecting\r\n" +
		"info_failed1:server=10.0.0.3:6379,error=LOADING Redis is loading the dataset in memory\r\n"
	if got != want {
		t.Errorf("one of three answered:\n%q\nwant\n%q", got, want)
	}
	if out := string(dialect.Merge(nil, infoRequest(t, nil), nil, nil, []codec.Reply{down, loading})); out != "-ERR backend failure: connecting\r\n" {
		t.Errorf("none answered: %q", out)
	}
	if out := string(dialect.Merge(nil, infoRequest(t, nil, "foo"), nil, nil, []codec.Reply{bulkReply(""), bulkReply("")})); out != "$0\r\n\r\n" {
		t.Errorf("an unknown section: %q, want what redis-server answers", out)
	}
}

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"7.0.15", "7.0.15", 0}, {"6.2.14", "7.0.15", -1}, {"7.0.9", "7.0.15", -1},
		{"7.2", "7.2.0", -1}, {"10.0.0", "9.9.9", 1}, {"7.0.0-rc1", "7.0.0-rc2", -1},
	} {
		if got := compareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestBytesToHuman(t *testing.T) {
	// Values and their human forms from redis-server 7.0.15's INFO memory.
	for n, want := range map[int64]string{200: "200B", 965976: "943.34K", 12103680: "11.54M", 25276063744: "23.54G", 0: "0B", 32768: "32.00K"} {
		if got := bytesToHuman(n); got != want {
			t.Errorf("bytesToHuman(%d) = %s, want %s", n, got, want)
		}
	}
}

// FuzzInfo: any text parses; written back and parsed again it gives the
// same sections; two servers' texts merge into one bulk string whose
// sections parse.
func FuzzInfo(f *testing.F) {
	f.Add([]byte(readInfo(f, "everything_a.txt")), []byte(readInfo(f, "everything_b.txt")))
	f.Add([]byte("# Keyspace\r\ndb0:keys=1,expires=1,avg_ttl=5\r\n"), []byte("# Keyspace\r\ndb0:keys=x,=,,avg_ttl=\r\ndb1:\r\n"))
	f.Add([]byte("#\r\n:\r\nnocolon\r\n\r\n# Memory\r\nused_memory_human:1\r\nused_memory:9223372036854775807\r\n"),
		[]byte("# Memory\r\nused_memory:9223372036854775807\r\nmaxmemory:1e400\r\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		secs := parseInfo(a)
		again := parseInfo(appendSections(nil, secs))
		if len(again) != len(secs) {
			t.Fatalf("%d sections, %d after a round trip", len(secs), len(again))
		}
		for i := range secs {
			if secs[i].name != again[i].name || len(secs[i].lines) != len(again[i].lines) {
				t.Fatalf("section %d changed: %+v -> %+v", i, secs[i], again[i])
			}
			for j := range secs[i].lines {
				if secs[i].lines[j] != again[i].lines[j] {
					t.Fatalf("line changed: %+v -> %+v", secs[i].lines[j], again[i].lines[j])
				}
			}
		}
		req := &codec.Request{Cmd: cmdINFO, Route: codec.RouteAll}
		out := dialect.Merge(nil, req, nil, nil, []codec.Reply{bulkReply(string(a)), bulkReply(string(b))})
		n, v := redcon.ReadNextRESP(out)
		if n != len(out) || v.Type != redcon.Bulk {
			t.Fatalf("merge gave %q", out)
		}
		if len(v.Data) > 4*(len(a)+len(b))+64 {
			t.Fatalf("merge of %d bytes gave %d", len(a)+len(b), len(v.Data))
		}
	})
}
