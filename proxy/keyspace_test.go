package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/resp"
)

// The keyspace commands (SCAN, KEYS, DBSIZE, RANDOMKEY, FLUSHALL, SCRIPT,
// FUNCTION) through a sharded pool of three redis-servers and through a
// Redis Cluster pool of three masters, each as two pools over the same
// servers: "…" refuses FLUSHALL (the default), "…f" has redis_flushall.

// keyspaceRig is one pool kind under test.
type keyspaceRig struct {
	addr, flushAddr string
	// servers in the order a SCAN cursor numbers them.
	servers []*testserver.Server
	// reload, if set, reloads the proxy with the same servers.
	reload func() error
}

func TestKeyspaceSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs redis-server")
	}
	servers := make([]*testserver.Server, 3)
	rdPort, rdfPort := testserver.FreePort(t), testserver.FreePort(t)
	var list strings.Builder
	for i := range servers {
		servers[i] = testserver.StartRedis(t)
		fmt.Fprintf(&list, "    - %s:1\n", servers[i].Addr)
	}
	pools := func(extra, servers string) string {
		return fmt.Sprintf("rd:\n  listen: 127.0.0.1:%d\n  redis: true\n%s  servers:\n%s", rdPort, extra, servers) +
			fmt.Sprintf("rdf:\n  listen: 127.0.0.1:%d\n  redis: true\n  redis_flushall: true\n  servers:\n%s", rdfPort, servers)
	}
	cfg, err := config.Parse([]byte(pools("", list.String())), "keyspace.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	// The reload keeps the servers (listed in another order, which
	// twemproxy's order by name ignores) and changes a key, so that the
	// pool is built anew.
	lines := strings.SplitAfter(list.String(), "\n") // the last is ""
	slices.Reverse(lines)
	reversed := strings.Join(lines, "")
	reload := func() error {
		cfg, err := config.Parse([]byte(pools("  timeout: 5000\n", reversed)), "keyspace.yml")
		if err != nil {
			return err
		}
		return srv.Reload(cfg)
	}
	// A sharded pool numbers its servers in twemproxy's order: by name,
	// here the address.
	ordered := slices.Clone(servers)
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Addr < ordered[j].Addr })
	testKeyspace(t, keyspaceRig{addr: srv.Addr("rd").String(), flushAddr: srv.Addr("rdf").String(), servers: ordered, reload: reload})
}

func TestKeyspaceCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs a real Redis Cluster")
	}
	rc := testserver.StartRedisCluster(t, 3, 1)
	yaml := clusterYAML("rc", rc.Addrs()[:1], "  read_from: prefer_replica\n") +
		clusterYAML("rcf", rc.Addrs()[:1], "  redis_flushall: true\n")
	cfg, err := config.Parse([]byte(yaml), "keyspace.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := startProxyCfg(t, cfg)
	for _, pool := range []string{"rc", "rcf"} { // a pool without its slot map answers CLUSTERDOWN
		waitFor(t, 10*time.Second, pool+"'s first slot map", func() bool { return routerStat(t, srv, pool, "cluster_ready") == 1 })
	}
	// A cluster pool numbers its masters by the first slot each serves:
	// Masters[i] serves the i-th slot range.
	testKeyspace(t, keyspaceRig{addr: srv.Addr("rc").String(), flushAddr: srv.Addr("rcf").String(), servers: rc.Masters})
}

func testKeyspace(t *testing.T, rig keyspaceRig) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: rig.addr, MaxRetries: -1, ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	flush := redis.NewClient(&redis.Options{Addr: rig.flushAddr, MaxRetries: -1})
	t.Cleanup(func() { flush.Close() })

	t.Run("flushall refused by default", func(t *testing.T) {
		for _, args := range [][]any{{"FLUSHALL"}, {"FLUSHALL", "ASYNC"}} {
			if err := rdb.Do(ctx, args...).Err(); err == nil || err.Error() != "ERR FLUSHALL is disabled for this pool" {
				t.Fatalf("%v: %v", args, err)
			}
		}
		if err := flush.FlushAll(ctx).Err(); err != nil {
			t.Fatalf("flushall with redis_flushall: %v", err)
		}
	})

	const n = 3000
	want := make(map[string]bool, n)
	pipe := rdb.Pipeline()
	for i := range n {
		k := "k:" + strconv.Itoa(i)
		want[k] = true
		pipe.Set(ctx, k, "v", 0)
	}
	for i := range 30 {
		pipe.HSet(ctx, "h:"+strconv.Itoa(i), "f", "v")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	perServer := make([]int64, len(rig.servers))
	for i, s := range rig.servers {
		v, err := testserver.RedisDo(s.Addr, "DBSIZE")
		if err != nil {
			t.Fatal(err)
		}
		perServer[i], _ = strconv.ParseInt(v, 10, 64)
		if perServer[i] == 0 {
			t.Fatalf("server %d has no keys: the test would not cross servers", i)
		}
	}
	t.Logf("keys per server: %v", perServer)

	t.Run("full scan while keys are added", func(t *testing.T) {
		stop := make(chan struct{})
		var added atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := redis.NewClient(&redis.Options{Addr: rig.addr, MaxRetries: -1})
			defer w.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := w.Set(ctx, "new:"+strconv.Itoa(i), "v", 0).Err(); err != nil {
					t.Errorf("concurrent set: %v", err)
					return
				}
				added.Add(1)
			}
		}()
		seen := map[string]int{}
		var cursor uint64
		calls, servers := 0, map[int]bool{}
		for {
			keys, next, err := rdb.Scan(ctx, cursor, "", 20).Result()
			if err != nil {
				t.Fatalf("scan %d: %v", cursor, err)
			}
			calls++
			// Keys added between every two calls too, so that the
			// servers' tables grow (and rehash) in the middle of the walk.
			pipe := rdb.Pipeline()
			for j := range 10 {
				pipe.Set(ctx, "new:"+strconv.Itoa(calls)+":"+strconv.Itoa(j), "v", 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			added.Add(10)
			server, _ := resp.SplitCursor(cursor)
			servers[server] = true
			for _, k := range keys {
				seen[k]++
			}
			if cursor = next; cursor == 0 {
				break
			}
			if calls > 10*n {
				t.Fatal("scan does not end")
			}
		}
		close(stop)
		wg.Wait()
		for k := range want {
			if seen[k] != 1 {
				t.Errorf("key %s returned %d times", k, seen[k])
			}
		}
		dupNew := 0
		for k, c := range seen {
			if strings.HasPrefix(k, "new:") && c > 1 {
				dupNew++
			}
		}
		if len(servers) != len(rig.servers) {
			t.Errorf("scan visited servers %v of %d", servers, len(rig.servers))
		}
		t.Logf("%d calls over %d servers; %d keys added meanwhile, %d of them seen, %d seen twice",
			calls, len(servers), added.Load(), len(seen)-n-30, dupNew)
	})
	if err := rdb.Del(ctx, scanAll(t, rdb, "new:*", "")...).Err(); err != nil {
		t.Fatal(err)
	}

	if rig.reload != nil {
		t.Run("scan across a reload", func(t *testing.T) {
			seen := map[string]int{}
			var cursor uint64
			for calls := 0; ; calls++ {
				if calls == 40 {
					if err := rig.reload(); err != nil {
						t.Fatal(err)
					}
				}
				keys, next, err := rdb.Scan(ctx, cursor, "k:*", 20).Result()
				if err != nil {
					t.Fatalf("scan %d: %v", cursor, err)
				}
				for _, k := range keys {
					seen[k]++
				}
				if cursor = next; cursor == 0 {
					if calls < 40 {
						t.Fatal("the scan ended before the reload")
					}
					break
				}
			}
			for k := range want {
				if seen[k] != 1 {
					t.Errorf("key %s returned %d times", k, seen[k])
				}
			}
		})
	}

	t.Run("scan match count type", func(t *testing.T) {
		got := scanAll(t, rdb, "k:1*", "")
		var exp []string
		for k := range want {
			if strings.HasPrefix(k, "k:1") {
				exp = append(exp, k)
			}
		}
		if !sameSet(got, exp) {
			t.Errorf("MATCH k:1*: %d keys, want %d", len(got), len(exp))
		}
		got = scanAll(t, rdb, "", "hash")
		if len(got) != 30 || !allPrefixed(got, "h:") {
			t.Errorf("TYPE hash: %v", got)
		}
		if got = scanAll(t, rdb, "nomatch*", ""); len(got) != 0 {
			t.Errorf("MATCH nomatch*: %v", got)
		}
		// A big COUNT takes a server's keys in one call: one call per server.
		var cursor uint64
		calls := 0
		for {
			_, next, err := rdb.Scan(ctx, cursor, "", 100000).Result()
			if err != nil {
				t.Fatal(err)
			}
			calls++
			if cursor = next; cursor == 0 {
				break
			}
		}
		if calls != len(rig.servers) {
			t.Errorf("COUNT 100000: %d calls for %d servers", calls, len(rig.servers))
		}
		// A cursor naming no server, and one redis-server refuses.
		for _, c := range []string{"3", "4095", "1a"} {
			if err := rdb.Do(ctx, "SCAN", c).Err(); err == nil || err.Error() != "ERR invalid cursor" {
				t.Errorf("SCAN %s: %v", c, err)
			}
		}
		if err := rdb.Do(ctx, "SCAN", "0", "COUNT", "0").Err(); err == nil || err.Error() != "ERR syntax error" {
			t.Errorf("SCAN 0 COUNT 0: %v", err)
		}
	})

	t.Run("keys dbsize randomkey", func(t *testing.T) {
		got, err := rdb.Keys(ctx, "k:2*").Result()
		if err != nil {
			t.Fatal(err)
		}
		var exp []string
		for k := range want {
			if strings.HasPrefix(k, "k:2") {
				exp = append(exp, k)
			}
		}
		if !sameSet(got, exp) || len(got) != len(exp) {
			t.Errorf("KEYS k:2*: %d keys, want %d", len(got), len(exp))
		}
		if size, err := rdb.DBSize(ctx).Result(); err != nil || size != n+30 {
			t.Errorf("DBSIZE: %d %v, want %d", size, err, n+30)
		}
		for range 20 {
			k, err := rdb.RandomKey(ctx).Result()
			if err != nil || !(want[k] || strings.HasPrefix(k, "h:")) {
				t.Fatalf("RANDOMKEY: %q %v", k, err)
			}
		}
	})

	t.Run("scripts", func(t *testing.T) {
		sha, err := rdb.ScriptLoad(ctx, "return redis.call('GET', KEYS[1])").Result()
		if err != nil || len(sha) != 40 {
			t.Fatalf("SCRIPT LOAD: %q %v", sha, err)
		}
		for _, s := range rig.servers { // every server has it
			if v, err := testserver.RedisDo(s.Addr, "EVALSHA", sha, "0"); err != nil && !strings.Contains(err.Error(), "ERR") {
				t.Fatalf("%s: %q %v", s.Addr, v, err)
			}
		}
		for i := range 30 { // keys on every server
			if v, err := rdb.EvalSha(ctx, sha, []string{"k:" + strconv.Itoa(i)}).Result(); err != nil || v != "v" {
				t.Fatalf("EVALSHA k:%d: %v %v", i, v, err)
			}
		}
		if ex, err := rdb.ScriptExists(ctx, sha, strings.Repeat("0", 40)).Result(); err != nil || !slices.Equal(ex, []bool{true, false}) {
			t.Fatalf("SCRIPT EXISTS: %v %v", ex, err)
		}
		// A script one server lacks exists for none.
		if _, err := testserver.RedisDo(rig.servers[0].Addr, "SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		if ex, err := rdb.ScriptExists(ctx, sha).Result(); err != nil || !slices.Equal(ex, []bool{false}) {
			t.Fatalf("SCRIPT EXISTS after one server's flush: %v %v", ex, err)
		}
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for _, s := range rig.servers {
			if _, err := testserver.RedisDo(s.Addr, "EVALSHA", sha, "0"); err == nil || !strings.Contains(err.Error(), "NOSCRIPT") {
				t.Fatalf("%s after SCRIPT FLUSH: %v", s.Addr, err)
			}
		}
	})

	t.Run("functions", func(t *testing.T) {
		const lib = "#!lua name=kslib\n" +
			"redis.register_function('ksget', function(keys, args) return redis.call('GET', keys[1]) end)\n" +
			"redis.register_function{function_name='ksone', callback=function() return 1 end, flags={'no-writes'}}"
		if v, err := rdb.FunctionLoad(ctx, lib).Result(); err != nil || v != "kslib" {
			t.Fatalf("FUNCTION LOAD: %q %v", v, err)
		}
		for i := range 30 {
			if v, err := rdb.FCall(ctx, "ksget", []string{"k:" + strconv.Itoa(i)}).Result(); err != nil || v != "v" {
				t.Fatalf("FCALL k:%d: %v %v", i, v, err)
			}
		}
		libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result()
		if err != nil || len(libs) != 1 || libs[0].Name != "kslib" || len(libs[0].Functions) != 2 {
			t.Fatalf("FUNCTION LIST: %+v %v", libs, err)
		}
		// Dumped from every server alike, and restored to every server.
		payload, err := rdb.FunctionDump(ctx).Result()
		if err != nil {
			t.Fatalf("FUNCTION DUMP: %v", err)
		}
		if err := rdb.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.FunctionRestore(ctx, payload).Err(); err != nil {
			t.Fatalf("FUNCTION RESTORE: %v", err)
		}
		for _, s := range rig.servers {
			if v, err := testserver.RedisDo(s.Addr, "FCALL", "ksone", "0"); err != nil || v != "1" {
				t.Fatalf("%s after FUNCTION RESTORE: %q %v", s.Addr, v, err)
			}
		}
		// Loaded again: every server refuses, and says why.
		if err := rdb.FunctionLoad(ctx, lib).Err(); err == nil || err.Error() != "ERR Library 'kslib' already exists" {
			t.Fatalf("FUNCTION LOAD again: %v", err)
		}
		// One server with another library: LIST and DUMP say the servers
		// differ, and a LOAD that only that server refuses answers its
		// error.
		other := "#!lua name=other\nredis.register_function('o', function() return 1 end)"
		if _, err := testserver.RedisDo(rig.servers[1].Addr, "FUNCTION", "LOAD", other); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "FUNCTION", "LIST").Err(); err == nil ||
			err.Error() != "ERR the servers' replies to FUNCTION LIST disagree or are not what it answers" {
			t.Fatalf("FUNCTION LIST with one server different: %v", err)
		}
		if err := rdb.FunctionDump(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR the servers' libraries differ: those of ") ||
			!strings.Contains(err.Error(), rig.servers[1].Addr) {
			t.Fatalf("FUNCTION DUMP with one server different: %v", err)
		}
		if err := rdb.FunctionLoad(ctx, other).Err(); err == nil || err.Error() != "ERR Library 'other' already exists" {
			t.Fatalf("FUNCTION LOAD one server has: %v", err)
		}
		for _, name := range []string{"kslib", "other"} {
			if err := rdb.FunctionDelete(ctx, name).Err(); err != nil {
				t.Fatalf("FUNCTION DELETE %s: %v", name, err)
			}
		}
		if err := rdb.FunctionDelete(ctx, "kslib").Err(); err == nil || err.Error() != "ERR Library not found" {
			t.Fatalf("FUNCTION DELETE gone: %v", err)
		}
		if libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) != 0 {
			t.Fatalf("FUNCTION LIST after delete: %+v %v", libs, err)
		}
		if err := rdb.FunctionLoad(ctx, lib).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.Do(ctx, "FUNCTION", "FLUSH", "SYNC").Err(); err != nil {
			t.Fatal(err)
		}
		if libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{}).Result(); err != nil || len(libs) != 0 {
			t.Fatalf("FUNCTION LIST after flush: %+v %v", libs, err)
		}
	})

	t.Run("flushall allowed", func(t *testing.T) {
		if err := flush.Do(ctx, "FLUSHALL", "SYNC").Err(); err != nil {
			t.Fatal(err)
		}
		if size, err := rdb.DBSize(ctx).Result(); err != nil || size != 0 {
			t.Fatalf("DBSIZE after FLUSHALL: %d %v", size, err)
		}
		if err := rdb.RandomKey(ctx).Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("RANDOMKEY on empty servers: %v", err)
		}
		if keys, err := rdb.Keys(ctx, "*").Result(); err != nil || len(keys) != 0 {
			t.Fatalf("KEYS after FLUSHALL: %v %v", keys, err)
		}
	})

	t.Run("server stopped mid-scan", func(t *testing.T) {
		pipe := rdb.Pipeline()
		for i := range n {
			pipe.Set(ctx, "k:"+strconv.Itoa(i), "v", 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		_, cursor, err := rdb.Scan(ctx, 0, "", 10).Result()
		if err != nil || cursor == 0 {
			t.Fatalf("first page: %d %v", cursor, err)
		}
		server, _ := resp.SplitCursor(cursor)
		rig.servers[server].Stop()
		t.Cleanup(rig.servers[server].Restart)
		if _, next, err := rdb.Scan(ctx, cursor, "", 10).Result(); err == nil {
			t.Fatalf("scan on a stopped server: cursor %d, no error", next)
		} else {
			t.Logf("scan on the stopped server: %v", err)
		}
		if size, err := rdb.DBSize(ctx).Result(); err == nil {
			t.Fatalf("DBSIZE with a server stopped: %d, no error", size)
		}
		if keys, err := rdb.Keys(ctx, "*").Result(); err == nil {
			t.Fatalf("KEYS with a server stopped: %d keys, no error", len(keys))
		}
	})
}

// scanAll runs a whole SCAN with MATCH match (if any) and TYPE typ (if
// any) and returns the keys, each once.
func scanAll(t *testing.T, rdb *redis.Client, match, typ string) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	var cursor uint64
	for {
		var keys []string
		var err error
		if typ != "" {
			keys, cursor, err = rdb.ScanType(ctx, cursor, match, 100, typ).Result()
		} else {
			keys, cursor, err = rdb.Scan(ctx, cursor, match, 100).Result()
		}
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for _, k := range keys {
			seen[k] = true
		}
		if cursor == 0 {
			break
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func allPrefixed(keys []string, prefix string) bool {
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			return false
		}
	}
	return true
}
