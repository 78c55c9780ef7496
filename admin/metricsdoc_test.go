package admin_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"shardproxy/admin"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// docMetric is a row of the metrics table of docs/operations.md.
type docMetric struct {
	names []*regexp.Regexp // the first cell's `names`; * and <name> are wildcards
	text  string           // the first cell as written
	typ   string           // the second cell: counter, gauge, histogram or empty
}

// metricsDoc is the page whose "## Metrics" section lists every series.
const metricsDoc = "../docs/operations.md"

// docMetrics reads the table of the "## Metrics" section of metricsDoc.
func docMetrics(t *testing.T) []docMetric {
	t.Helper()
	b, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		t.Fatalf("%s has no ## Metrics section", metricsDoc)
	}
	section, _, _ = strings.Cut(section, "\n#")
	quoted := regexp.MustCompile("`([^`]+)`")
	var rows []docMetric
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		row := docMetric{text: strings.TrimSpace(cells[1]), typ: strings.TrimSpace(cells[2])}
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			expr := regexp.QuoteMeta(m[1])
			expr = strings.ReplaceAll(expr, `\*`, `.*`)
			expr = regexp.MustCompile(`<[a-z]+>`).ReplaceAllString(expr, `[A-Za-z0-9_]+`)
			row.names = append(row.names, regexp.MustCompile("^"+expr+"$"))
		}
		rows = append(rows, row)
	}
	if len(rows) < 20 {
		t.Fatalf("%s's metrics table has %d rows; the parser lost it", metricsDoc, len(rows))
	}
	return rows
}

// metricsRoute is a Lua route file with a counter of its own, answering
// from the pool's own cache.
const metricsRoute = `
function mcp_config_pools()
  mcp.add_stat(1, "seen")
  return {}
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
    mcp.stat(1, 1)
    return mcp.internal(r)
  end)
end
`

// TestDocsMetrics scrapes /metrics on a proxy with a pool of every kind
// (sharded with hot keys, near cache, Lua with its own cache and a counter
// of the route file's, Redis Cluster), in a fleet whose ring the sharded pool follows,
// after some traffic, and fails if a series is
// missing from the metrics table of docs/operations.md, has another type there, or if the
// table lists a series the proxy does not serve.
func TestDocsMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs memcached and a Redis Cluster")
	}
	rows := docMetrics(t)
	mc := testserver.StartMemcached(t).Addr
	cl := testserver.StartRedisCluster(t, 3, 0)
	dir := t.TempDir()
	lua := filepath.Join(dir, "routes.lua")
	if err := os.WriteFile(lua, []byte(metricsRoute), 0o644); err != nil {
		t.Fatal(err)
	}
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "mc:\n  listen: 127.0.0.1:0\n  auto_eject_hosts: true\n  hot_keys: 3\n  servers:\n    - %s:1\n", mc)
	fmt.Fprintf(&yaml, "nc:\n  listen: 127.0.0.1:0\n  near_cache: 1\n  delete_spool:\n    path: nc.spool\n  servers:\n    - %s:1\n", mc)
	fmt.Fprintf(&yaml, "lp:\n  listen: 127.0.0.1:0\n  lua: %s\n  lua_internal_cache: 1\n", lua)
	// route pools: a migration, and a pool with a shadow and a failover
	yaml.WriteString("mg:\n  listen: 127.0.0.1:0\n  route:\n    migrate:\n      from: mc\n      to: nc\n      phase: warm\n")
	yaml.WriteString("sf:\n  listen: 127.0.0.1:0\n  route:\n    pool: mc\n    shadow:\n      pool: nc\n    failover:\n      pool: nc\n")
	yaml.WriteString("rc:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_cluster: true\n  servers:\n")
	for _, a := range cl.Addrs() {
		fmt.Fprintf(&yaml, "    - %s:1\n", a)
	}
	srv := startProxyOpts(t, writeConfig(t, filepath.Join(dir, "conf.yml"), yaml.String()),
		proxy.Options{Logger: testLogger(t), FleetRing: true})
	srv.SetFleetState(proxy.FleetState{ID: "p1", Prefix: "/shardproxy/test", Connected: true, ConfigRevision: 5, Proxies: 1})
	srv.SetRing("mc", proxy.Ring{Version: 2})
	for _, p := range []string{"mc", "nc", "lp", "mg", "sf"} {
		c := dialMC(t, srv.Addr(p).String())
		c.do("set k 0 0 1\r\nv\r\n", "STORED", "SERVER_ERROR")
		c.do("get k\r\n", "END", "SERVER_ERROR")
	}
	if r := dialRESP(t, srv.Addr("rc").String()).do("SET", "k", "v"); r != "+OK\r\n" {
		t.Fatalf("SET through the cluster pool: %q", r)
	}

	fams := families(t, scrape(t, admin.Handler(srv, admin.HTTPConfig{Logger: testLogger(t)}), ""))
	used := make([]bool, len(rows))
	for name, f := range fams {
		found := false
		for i, row := range rows {
			for _, re := range row.names {
				if !re.MatchString(name) {
					continue
				}
				found, used[i] = true, true
				if typ := strings.ToLower(f.GetType().String()); row.typ != "" && row.typ != typ {
					t.Errorf("%s says %s is a %s; /metrics serves a %s", metricsDoc, name, row.typ, typ)
				}
			}
		}
		if !found {
			t.Errorf("%s (%s: %s) is missing from the metrics table of %s", name,
				strings.ToLower(f.GetType().String()), f.GetHelp(), metricsDoc)
		}
	}
	for i, row := range rows {
		if !used[i] {
			t.Errorf("the metrics table of %s lists %s, which /metrics does not serve", metricsDoc, row.text)
		}
	}
	if _, ok := fams["shardproxy_router_user_seen"]; !ok {
		t.Error("the route file's counter is not served: the test lost a pool kind")
	}
}
