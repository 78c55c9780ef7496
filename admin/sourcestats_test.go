package admin_test

import (
	"encoding/json"
	"strings"
	"testing"

	"shardproxy/admin"
	"shardproxy/proxy"
)

// dnsSource is fakeSource with a pool whose servers come from DNS.
type dnsSource struct{ fakeSource }

func (d dnsSource) Stats() proxy.Stats {
	st := d.fakeSource.Stats()
	st.Pools[0].Source = []proxy.RouterStat{
		{Name: "dns_changes", Kind: proxy.RouterCounter, Value: 4, Help: "sets applied"},
		{Name: "dns_servers", Kind: proxy.RouterGauge, Value: 3, Help: "servers in use"},
	}
	return st
}

// A pool's source figures (servers_from's) reach /metrics as
// shardproxy_<name>, and /status and the status page in a section of
// their own.
func TestSourceStats(t *testing.T) {
	h := admin.Handler(dnsSource{}, admin.HTTPConfig{})
	metrics := get(t, h, "GET", "/metrics", "").Body.String()
	for _, want := range []string{`shardproxy_dns_changes_total{pool="p"} 4`, `shardproxy_dns_servers{pool="p"} 3`, "# HELP shardproxy_dns_servers servers in use"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var doc struct {
		Pools []struct {
			Source []struct {
				Kind  string
				Total int64
			}
		}
	}
	if err := json.Unmarshal(get(t, h, "GET", "/status", "").Body.Bytes(), &doc); err != nil || len(doc.Pools) != 1 ||
		len(doc.Pools[0].Source) != 2 || doc.Pools[0].Source[0].Kind != "dns_changes" || doc.Pools[0].Source[0].Total != 4 {
		t.Errorf("/status: %+v %v", doc, err)
	}
	page := get(t, h, "GET", "/", "").Body.String()
	if !strings.Contains(page, "<summary>servers from DNS</summary>") || !strings.Contains(page, `<td>dns_servers</td><td class="num">3</td>`) {
		t.Errorf("the page has no servers from DNS section")
	}
}
