package fleet_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"shardproxy/fleet"
)

// etcdCounters are what the simulation reads of etcd's own /metrics, summed
// over the members: messages the clients sent (unary requests and stream
// messages such as lease keep-alives), by gRPC method; messages etcd sent
// back (watch events among them); the bytes both ways; and the Raft
// proposals committed (the cluster's writes; the largest member's count).
// They include the simulation's own few reads (Range), which wait for the
// agents to settle.
type etcdCounters struct {
	received  map[string]float64
	sent      float64
	bytesIn   float64
	bytesOut  float64
	proposals float64
}

// scrapeEtcd reads every member's /metrics.
func scrapeEtcd(endpoints []string) (etcdCounters, error) {
	c := etcdCounters{received: map[string]float64{}}
	hc := http.Client{Timeout: 5 * time.Second}
	for _, ep := range endpoints {
		resp, err := hc.Get("http://" + ep + "/metrics")
		if err != nil {
			return c, err
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return c, err
		}
		for _, m := range mfs["grpc_server_msg_received_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "grpc_method" {
					c.received[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
		c.sent += sum(mfs["grpc_server_msg_sent_total"].GetMetric())
		c.bytesIn += sum(mfs["etcd_network_client_grpc_received_bytes_total"].GetMetric())
		c.bytesOut += sum(mfs["etcd_network_client_grpc_sent_bytes_total"].GetMetric())
		c.proposals = max(c.proposals, sum(mfs["etcd_server_proposals_committed_total"].GetMetric()))
	}
	return c, nil
}

// sum adds up the values of counters and gauges.
func sum(ms []*dto.Metric) float64 {
	var v float64
	for _, m := range ms {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v
}

// window is the start of a measured span: the agents' traffic and etcd's
// counters then.
type window struct {
	s      *sim
	start  time.Time
	client fleet.Traffic
	etcd   etcdCounters
}

// span is what happened over a window.
type span struct {
	d      time.Duration
	agents int
	client fleet.Traffic // summed over the agents
	etcd   etcdCounters  // differences
}

func (s *sim) window() window {
	s.tb.Helper()
	e, err := scrapeEtcd(s.etcd.Endpoints())
	if err != nil {
		s.tb.Fatal(err)
	}
	return window{s: s, start: time.Now(), client: s.traffic(), etcd: e}
}

// traffic sums every agent's traffic.
func (s *sim) traffic() fleet.Traffic {
	var t fleet.Traffic
	for _, a := range s.agents {
		at := a.Traffic()
		t.RPCs += at.RPCs
		t.MessagesSent += at.MessagesSent
		t.MessagesReceived += at.MessagesReceived
		t.BytesSent += at.BytesSent
		t.BytesReceived += at.BytesReceived
	}
	return t
}

func (w window) end() span {
	w.s.tb.Helper()
	e, err := scrapeEtcd(w.s.etcd.Endpoints())
	if err != nil {
		w.s.tb.Fatal(err)
	}
	c := w.s.traffic()
	sp := span{d: time.Since(w.start), agents: len(w.s.agents), etcd: etcdCounters{received: map[string]float64{}}}
	sp.client = fleet.Traffic{RPCs: c.RPCs - w.client.RPCs, MessagesSent: c.MessagesSent - w.client.MessagesSent,
		MessagesReceived: c.MessagesReceived - w.client.MessagesReceived,
		BytesSent:        c.BytesSent - w.client.BytesSent, BytesReceived: c.BytesReceived - w.client.BytesReceived}
	for m, v := range e.received {
		if d := v - w.etcd.received[m]; d > 0 {
			sp.etcd.received[m] = d
		}
	}
	sp.etcd.sent = e.sent - w.etcd.sent
	sp.etcd.bytesIn, sp.etcd.bytesOut = e.bytesIn-w.etcd.bytesIn, e.bytesOut-w.etcd.bytesOut
	sp.etcd.proposals = e.proposals - w.etcd.proposals
	return sp
}

// perProxy is n per second and per agent over the span.
func (sp span) perProxy(n int64) float64 {
	return float64(n) / sp.d.Seconds() / float64(sp.agents)
}

// per is the span's traffic divided by div, each unit (a second, a
// change): per proxy (the agents' own clients) and for etcd as a whole
// (its counters, the messages by gRPC method).
func (sp span) per(div float64, unit string) string {
	var req float64
	var methods []string
	for m, v := range sp.etcd.received {
		req += v
		methods = append(methods, fmt.Sprintf("%s %.1f", m, v/div))
	}
	slices.Sort(methods)
	n := div * float64(sp.agents)
	return fmt.Sprintf("  per proxy and %s: %.2f messages sent, %.2f received; %.0f B sent, %.0f B received\n"+
		"  etcd per %s: %.1f messages received (%s), %.1f sent; %.1f kB in, %.1f kB out; %.1f Raft proposals",
		unit, float64(sp.client.MessagesSent)/n, float64(sp.client.MessagesReceived)/n,
		float64(sp.client.BytesSent)/n, float64(sp.client.BytesReceived)/n,
		unit, req/div, strings.Join(methods, ", "), sp.etcd.sent/div, sp.etcd.bytesIn/div/1e3, sp.etcd.bytesOut/div/1e3,
		sp.etcd.proposals/div)
}

// dist is a latency distribution.
type dist struct {
	n             int
	p50, p99, max time.Duration
}

func percentiles(d []time.Duration) dist {
	if len(d) == 0 {
		return dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return dist{n: len(s), p50: at(0.50), p99: at(0.99), max: s[len(s)-1]}
}

func (d dist) String() string {
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d samples)", d.p50.Round(100*time.Microsecond),
		d.p99.Round(100*time.Microsecond), d.max.Round(100*time.Microsecond), d.n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report is one simulation's figures.
type report struct {
	scale
	atRest, changing, ejecting span
	config, eject, restore     dist
	errors                     int64 // the agents' failed etcd requests and lost sessions
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fleet scale: %d agents, each its own etcd client, against a 3-member etcd on loopback\n", r.agents)
	fmt.Fprintf(&b, "at rest, %v:\n%s\n", r.atRest.d.Round(time.Second), r.atRest.per(r.atRest.d.Seconds(), "second"))
	fmt.Fprintf(&b, "configuration change (%d published), Put to each agent's Apply: %v\n%s\n", r.changes, r.config,
		r.changing.per(float64(r.changes), "change"))
	fmt.Fprintf(&b, "ejection (%d rounds), the report that tips the majority to each agent's SetRing: %v\n", r.ejects, r.eject)
	fmt.Fprintf(&b, "restore, every report cleared to each agent's SetRing: %v\n%s\n", r.restore,
		r.ejecting.per(float64(r.ejects), "round (ejection and restore)"))
	fmt.Fprintf(&b, "failed etcd requests and lost sessions, all agents, the whole run: %d\n", r.errors)
	return b.String()
}
