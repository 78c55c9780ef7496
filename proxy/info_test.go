package proxy_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"shardproxy/internal/testserver"
)

// INFO on a sharded Redis pool and a Redis Cluster pool merges the
// servers' sections (resp/infomerge.go has the rules), then adds the
// proxy's own.

// infoText returns the text of an INFO bulk reply.
func infoText(t testing.TB, reply string) string {
	t.Helper()
	head, rest, ok := strings.Cut(reply, "\r\n")
	n, err := strconv.Atoi(strings.TrimPrefix(head, "$"))
	if !ok || !strings.HasPrefix(head, "$") || err != nil || len(rest) != n+2 || !strings.HasSuffix(rest, "\r\n") {
		t.Fatalf("not a bulk string: %q", reply)
	}
	return rest[:n]
}

// infoFields parses INFO's text as client libraries do (redis-py's
// parse_info, go-redis's InfoMap): "# Section" headers, "key:value" lines.
func infoFields(text string) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	for _, line := range strings.Split(text, "\r\n") {
		if name, ok := strings.CutPrefix(line, "# "); ok {
			section = name
			out[section] = map[string]string{}
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok && out[section] != nil {
			out[section][k] = v
		}
	}
	return out
}

// infoHeaders lists the section names of an INFO text, checking that it
// is laid out as redis-server lays it out: a header first, "\r\n" after
// every line, one empty line between sections and none elsewhere.
func infoHeaders(t testing.TB, text string) []string {
	t.Helper()
	if text == "" {
		return nil
	}
	if !strings.HasSuffix(text, "\r\n") || strings.Contains(strings.ReplaceAll(text, "\r\n", ""), "\n") {
		t.Fatalf("INFO lines must end in \\r\\n: %q", text)
	}
	var names []string
	for _, sec := range strings.Split(strings.TrimSuffix(text, "\r\n"), "\r\n\r\n") {
		header, _, _ := strings.Cut(sec, "\r\n")
		name, ok := strings.CutPrefix(header, "# ")
		if !ok || strings.Contains(sec, "\r\n\r\n") {
			t.Fatalf("section without its header or with an empty line: %q", sec)
		}
		names = append(names, name)
	}
	return names
}

// dbKeys returns db0's keys and expires in an INFO text.
func dbKeys(t testing.TB, text string) (keys, expires int) {
	t.Helper()
	db := infoFields(text)["Keyspace"]["db0"]
	for _, kv := range strings.Split(db, ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, _ := strconv.Atoi(v)
		switch k {
		case "keys":
			keys = n
		case "expires":
			expires = n
		}
	}
	return keys, expires
}

func TestRedisInfoMerged(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 2000\n  server_retry_timeout: 60000\n")
	_, addr := startProxy(t, yaml, "rd")
	c := respDial(t, addr)
	for i := range 300 {
		args := []string{"SET", "info:" + strconv.Itoa(i), "v"}
		if i%3 == 0 {
			args = append(args, "EX", "1000")
		}
		if got := c.do(args...); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	direct := make([]*respClient, len(servers))
	for i, s := range servers {
		direct[i] = directRedis(t, s.Addr, "", 0)
	}

	// The sections: what one server has, then the proxy's.
	for _, args := range [][]string{{"INFO"}, {"INFO", "all"}, {"INFO", "EVERYTHING"}, {"INFO", "default", "commandstats"}} {
		want := append(infoHeaders(t, infoText(t, direct[0].do(args...))), "Proxy")
		got := infoHeaders(t, infoText(t, c.do(args...)))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%v: sections %v, want %v", args, got, want)
		}
	}
	for _, args := range [][]string{{"INFO", "server"}, {"INFO", "keyspace", "Server"}, {"INFO", "server", "nosuch"}, {"INFO", "cpu"}} {
		want := infoHeaders(t, infoText(t, direct[0].do(args...)))
		got := infoHeaders(t, infoText(t, c.do(args...)))
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%v: sections %v, want %v", args, got, want)
		}
	}
	if got, want := c.do("INFO", "nosuch"), direct[0].do("INFO", "nosuch"); got != want || want != "$0\r\n\r\n" {
		t.Errorf("INFO of an unknown section: %q, redis-server answers %q", got, want)
	}
	if got := infoText(t, c.do("INFO", "proxy")); !strings.HasPrefix(got, "# Proxy\r\n") || strings.Count(got, "# ") != 1 {
		t.Errorf("INFO proxy: %q", got)
	}

	// Keyspace and counts summed; Server from a server.
	var keys, expires, maxclients int
	for _, d := range direct {
		text := infoText(t, d.do("INFO"))
		k, e := dbKeys(t, text)
		keys, expires = keys+k, expires+e
		n, _ := strconv.Atoi(infoFields(text)["Clients"]["maxclients"])
		maxclients += n
	}
	text := infoText(t, c.do("INFO"))
	if k, e := dbKeys(t, text); k != keys || e != expires || k != 300 || e != 100 {
		t.Errorf("db0 keys=%d expires=%d; the servers have %d and %d", k, e, keys, expires)
	}
	f := infoFields(text)
	version := infoFields(infoText(t, direct[0].do("INFO", "server")))["Server"]["redis_version"]
	if f["Server"]["redis_version"] != version || version == "" {
		t.Errorf("redis_version %q, the servers run %q", f["Server"]["redis_version"], version)
	}
	if f["Clients"]["maxclients"] != strconv.Itoa(maxclients) {
		t.Errorf("maxclients %s, want the sum %d", f["Clients"]["maxclients"], maxclients)
	}
	if f["Proxy"]["info_servers"] != "3" || f["Proxy"]["info_servers_answered"] != "3" || f["Proxy"]["cmd_set"] != "300" {
		t.Errorf("Proxy section: %v", f["Proxy"])
	}

	// A client library: go-redis's Info and InfoMap.
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer rdb.Close()
	ctx := context.Background()
	m, err := rdb.InfoMap(ctx).Result()
	if err != nil || m["Server"]["redis_version"] != version || m["Keyspace"]["db0"] == "" {
		t.Errorf("go-redis InfoMap: %v %v", m["Server"], err)
	}
	if s, err := rdb.Info(ctx, "server", "keyspace").Result(); err != nil || !strings.HasPrefix(s, "# Server\r\nredis_version:"+version+"\r\n") {
		t.Errorf("go-redis Info server keyspace: %q %v", s, err)
	}

	// One server down: the others answer, and the Proxy section says so.
	down := servers[1]
	dk, de := dbKeys(t, infoText(t, direct[1].do("INFO", "keyspace")))
	down.Stop()
	text = infoText(t, c.do("INFO", "keyspace"))
	if names := infoHeaders(t, text); strings.Join(names, " ") != "Keyspace Proxy" {
		t.Errorf("sections with a server down: %v", names)
	}
	if k, e := dbKeys(t, text); k != keys-dk || e != expires-de {
		t.Errorf("with %s down: db0 keys=%d expires=%d, want %d %d", down.Addr, k, e, keys-dk, expires-de)
	}
	p := infoFields(text)["Proxy"]
	if p["info_servers"] != "3" || p["info_servers_answered"] != "2" ||
		!strings.HasPrefix(p["info_failed0"], "server="+down.Addr+",error=backend failure: ") {
		t.Errorf("Proxy section with %s down: %v", down.Addr, p)
	}
	if _, ok := p["requests"]; ok {
		t.Errorf("INFO keyspace shows the proxy's counters: %v", p)
	}
	if s, err := rdb.InfoMap(ctx).Result(); err != nil || s["Server"]["redis_version"] != version {
		t.Errorf("go-redis InfoMap with a server down: %v %v", s["Server"], err)
	}
}

// testClusterInfo: INFO through a Redis Cluster pool merges the masters'
// sections, and presents the proxy as a standalone server.
func testClusterInfo(t *testing.T, rc *testserver.Cluster, addr string) {
	c := respDial(t, addr)
	for i := range 200 {
		if got := c.do("SET", "ci:"+strconv.Itoa(i), "v"); got != "+OK\r\n" {
			t.Fatalf("SET: %q", got)
		}
	}
	var keys, expires int
	for _, m := range rc.Masters {
		k, e := dbKeys(t, infoText(t, directRedis(t, m.Addr, "", 0).do("INFO", "keyspace")))
		keys, expires = keys+k, expires+e
	}
	text := infoText(t, c.do("INFO"))
	if k, e := dbKeys(t, text); k != keys || e != expires || k < 200 {
		t.Errorf("db0 keys=%d expires=%d; the masters have %d and %d", k, e, keys, expires)
	}
	f := infoFields(text)
	if f["Server"]["redis_mode"] != "standalone" || f["Cluster"]["cluster_enabled"] != "0" || f["Server"]["redis_version"] == "" {
		t.Errorf("Server %v, Cluster %v", f["Server"], f["Cluster"])
	}
	if p := f["Proxy"]; p["info_servers"] != strconv.Itoa(len(rc.Masters)) || p["info_servers_answered"] != p["info_servers"] {
		t.Errorf("Proxy section: %v", p)
	}
	direct := infoHeaders(t, infoText(t, directRedis(t, rc.Masters[0].Addr, "", 0).do("INFO", "everything")))
	if got := infoHeaders(t, infoText(t, c.do("INFO", "everything"))); strings.Join(got, " ") != strings.Join(append(direct, "Proxy"), " ") {
		t.Errorf("INFO everything: %v, a node answers %v", got, direct)
	}
}
