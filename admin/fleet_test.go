package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/proxy"
)

// TestFleetShown: a proxy in a fleet shows the fleet's state and its ring
// pool's ring on /metrics, the stats port, /status and the status page; a
// pool that is no ring pool shows no ring.
func TestFleetShown(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	a, b := testserver.StartMemcached(t), testserver.StartMemcached(t)
	yaml := fmt.Sprintf("ring:\n  listen: 127.0.0.1:0\n  auto_eject_hosts: true\n  servers:\n    - %s:1 a\n    - %s:1 b\n"+
		"plain:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1 a\n", a.Addr, b.Addr, a.Addr)
	cfg, err := config.Parse([]byte(yaml), "fleet.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv := startProxyOpts(t, cfg, proxy.Options{Logger: testLogger(t), FleetRing: true})
	srv.SetFleetState(proxy.FleetState{ID: "p1", Prefix: "/shardproxy/prod", Endpoints: []string{"127.0.0.1:2379"},
		Connected: true, ConfigRevision: 42, ConfigChecksum: "abc123", Proxies: 3, Errors: 2, Refused: 1,
		LastError: "etcd: timeout"})
	srv.SetRing("ring", proxy.Ring{Version: 4, Ejected: []string{"b"}})
	h := admin.Handler(srv, admin.HTTPConfig{Logger: testLogger(t)})

	fams := families(t, scrape(t, h, ""))
	for _, m := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"shardproxy_fleet_info", []string{"id", "p1", "prefix", "/shardproxy/prod"}, 1},
		{"shardproxy_fleet_connected", nil, 1},
		{"shardproxy_fleet_config_revision", nil, 42},
		{"shardproxy_fleet_proxies", nil, 3},
		{"shardproxy_fleet_errors_total", nil, 2},
		{"shardproxy_fleet_refused_total", nil, 1},
		{"shardproxy_ring_version", []string{"pool", "ring"}, 4},
		{"shardproxy_ring_ejected", []string{"pool", "ring"}, 1},
	} {
		if v, ok := value(fams, m.name, m.labels...); !ok || v != m.want {
			t.Errorf("%s%v: %v (%t), want %v", m.name, m.labels, v, ok, m.want)
		}
	}
	if _, ok := value(fams, "shardproxy_ring_version", "pool", "plain"); ok {
		t.Error("pool plain, no ring pool, has a ring version")
	}

	doc := statsDoc(t, readStats(t, startStats(t, srv, 50*time.Millisecond).Addr().String()))
	ring := doc["ring"].(map[string]any)
	for name, ejected := range map[string]float64{"a": 0, "b": 1} {
		s := ring[name].(map[string]any)
		if s["ring_version"] != 4.0 || s["ring_ejected"] != ejected {
			t.Errorf("stats port: ring's server %s: ring_version %v, ring_ejected %v", name, s["ring_version"], s["ring_ejected"])
		}
	}
	if _, ok := doc["plain"].(map[string]any)["a"].(map[string]any)["ring_version"]; ok {
		t.Error("stats port: pool plain's server has a ring_version")
	}

	w := get(t, h, "GET", "/status", "")
	if w.Code != http.StatusOK {
		t.Fatalf("/status: %d %s", w.Code, w.Body)
	}
	var st struct {
		Fleet *struct {
			ID             string
			Prefix         string
			Connected      bool
			ConfigRevision int64 `json:"config_revision"`
		}
		Pools []struct {
			Name string
			Ring *struct {
				Version int64
				Ejected []string
			}
			Servers []struct{ Name, State string }
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &st); err != nil {
		t.Fatalf("/status: %v\n%s", err, w.Body)
	}
	if st.Fleet == nil || st.Fleet.ID != "p1" || !st.Fleet.Connected || st.Fleet.ConfigRevision != 42 {
		t.Errorf("/status fleet: %+v", st.Fleet)
	}
	if len(st.Pools) != 2 || st.Pools[0].Ring == nil || st.Pools[0].Ring.Version != 4 ||
		!slices.Equal(st.Pools[0].Ring.Ejected, []string{"b"}) || st.Pools[1].Ring != nil {
		t.Fatalf("/status pools: %+v", st.Pools)
	}
	if s := st.Pools[0].Servers; len(s) != 2 || s[0].State != "up" || s[1].State != "ejected" {
		t.Errorf("/status ring's servers: %+v, want a up, b ejected", s)
	}

	page := get(t, h, "GET", "/", "").Body.String()
	for _, want := range []string{
		`fleet <code>/shardproxy/prod</code> as <code>p1</code>`, "config revision 42 (abc123)", "3 proxies",
		"last error: etcd: timeout", `ring version <span class="ring-version">4</span>, ejected: b`,
		`data-server="b" data-state="ejected"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page: no %q in\n%s", want, page)
		}
	}
}
