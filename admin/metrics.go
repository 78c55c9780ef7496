package admin

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shardproxy/proxy"
)

// latencyBounds are the upper bounds of the backends' latency buckets.
var latencyBounds = proxy.LatencyBuckets

// Collector is a prometheus.Collector that reads a Source's Stats and Info
// at each scrape, so it keeps no state of its own and follows reloads.
type Collector struct {
	src Source
	d   descs
}

var _ prometheus.Collector = (*Collector)(nil)

// descs are the metrics Collector exports. Labels: pool; pool and backend
// (the server's node name, its key in the stats JSON).
type descs struct {
	buildInfo, start, accepted, reloads, reloadFailures, loaded, configInfo, spliced *prometheus.Desc

	draining, drainConns, drainRequests *prometheus.Desc

	poolRequests, poolErrors, poolClientEOF, poolClients, poolFragments, poolLatency *prometheus.Desc

	commandLatency, slowRequests, tapSubscribers, tapLines, tapDropped, hotRequests, hotBytes *prometheus.Desc

	beRequests, beRequestBytes, beResponses, beResponseBytes, beErrors       *prometheus.Desc
	beConns, beInQueue, beOutQueue, beEjections, beUp, beFailures, beLatency *prometheus.Desc
	beRedirects, beChecks, beCheckFailures, beRestores, beProbing            *prometheus.Desc

	fleet fleetDescs
}

// NewCollector returns a Collector reading src.
func NewCollector(src Source) *Collector {
	pool := []string{"pool"}
	be := []string{"pool", "backend"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("shardproxy_"+name, help, labels, nil)
	}
	return &Collector{src: src, d: descs{
		buildInfo:      d("build_info", "Always 1; the labels tell shardproxy's version and Go version.", "version", "go_version"),
		start:          d("start_time_seconds", "When the process started, in seconds since the epoch."),
		accepted:       d("client_connections_accepted_total", "Client connections accepted (twemproxy's total_connections)."),
		reloads:        d("config_reloads_total", "Successful configuration reloads."),
		reloadFailures: d("config_reload_failures_total", "Reloads refused: the file could not be read, parsed, validated or bound."),
		loaded:         d("config_loaded_timestamp_seconds", "When the running configuration was loaded, in seconds since the epoch."),
		configInfo:     d("config_info", "Always 1; the labels tell the running configuration's file and checksum.", "source", "checksum"),
		spliced:        d("spliced_replies_total", "Replies whose value went from the server's socket to the client's by splice(2), not through the proxy's memory."),

		draining:      d("draining", "1 once the proxy drains (SIGTERM, POST /drain, an upgrade), else 0."),
		drainConns:    d("drain_connections_total", "Client connections a drain ended, by result: drained (closed once everything read from them was answered), handed (passed to the process of an upgrade, everything read from them answered), cut (still busy at the deadline).", "result"),
		drainRequests: d("drain_requests_total", "Requests of a drain, by result: answered (in flight when it began, or read after), cut (unanswered on a connection cut at the deadline).", "result"),

		poolRequests:  d("pool_requests_total", "Requests read from clients.", pool...),
		poolErrors:    d("pool_errors_total", "Errors by kind: client (twemproxy's client_err), forward (forward_error), protocol (requests that could not be parsed).", "pool", "kind"),
		poolClientEOF: d("pool_client_eof_total", "Client connections closed by the client (client_eof).", pool...),
		poolClients:   d("pool_client_connections", "Open client connections (client_connections).", pool...),
		poolFragments: d("pool_fragments_total", "Sub-requests made by splitting multi-key requests (fragments).", pool...),
		poolLatency:   d("pool_latency_seconds", "Backend reply latency over every backend the pool has had, removed ones included.", pool...),

		commandLatency: d("command_latency_seconds", "Requests by command, from reading the request to handing its reply to the client's socket.", "pool", "command"),
		slowRequests:   d("slow_requests_total", "Requests the pool's slowlog took: at least slowlog_threshold from read to written.", pool...),
		tapSubscribers: d("tap_subscribers", "Clients following the tap (GET /tap, shardproxy tap)."),
		tapLines:       d("tap_lines_total", "Lines the tap offered its subscribers."),
		tapDropped:     d("tap_dropped_total", "Tap lines lost because their subscriber read too slowly."),
		hotRequests:    d("hot_key_requests", "The pool's most requested keys (hot_keys of them) and their requests over the last 10 seconds (a count-min sketch's estimate).", "pool", "key"),
		hotBytes:       d("hot_key_bytes", "The reply bytes of those keys' requests over the last 10 seconds (estimate).", "pool", "key"),

		beRequests:      d("backend_requests_total", "Requests sent to the backend (requests).", be...),
		beRequestBytes:  d("backend_request_bytes_total", "Request bytes sent to the backend (request_bytes).", be...),
		beResponses:     d("backend_responses_total", "Replies read from the backend (responses).", be...),
		beResponseBytes: d("backend_response_bytes_total", "Reply bytes read from the backend (response_bytes).", be...),
		beErrors:        d("backend_errors_total", "Backend failures by kind: error (server_err), timeout (server_timedout), eof (server_eof).", "pool", "backend", "kind"),
		beConns:         d("backend_connections", "Open backend connections (server_connections).", be...),
		beInQueue:       d("backend_in_queue", "Requests queued, not yet written (in_queue).", be...),
		beOutQueue:      d("backend_out_queue", "Requests written, awaiting a reply (out_queue).", be...),
		beEjections:     d("backend_ejections_total", "Times the backend was marked bad.", be...),
		beUp:            d("backend_up", "1 while the backend serves, 0 while it is marked bad (ejected, failing fast).", be...),
		beFailures:      d("backend_consecutive_failures", "Consecutive failures; 0 once the backend answers again.", be...),
		beLatency:       d("backend_latency_seconds", "Backend reply latency: from sending a request to its reply.", be...),
		beRedirects:     d("backend_redirects_total", "Redis Cluster replies the node sent, by kind: moved, ask (followed), tryagain (retried). Only redis_cluster pools.", "pool", "backend", "kind"),
		beChecks:        d("backend_health_checks_total", "Health checks sent, by kind: probe (a bad backend's new socket put through the handshake), idle (the validation request on an idle socket).", "pool", "backend", "kind"),
		beCheckFailures: d("backend_health_check_failures_total", "Health checks that failed, by kind: probe (the backend stays bad), idle (the socket was dropped and is dialled anew).", "pool", "backend", "kind"),
		beRestores:      d("backend_restores_total", "Times a bad backend was brought back by a successful probe.", be...),
		beProbing:       d("backend_probing", "1 while a bad backend past its retry time waits for a probe to succeed, else 0.", be...),

		fleet: newFleetDescs(d),
	}}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.d.buildInfo, c.d.start, c.d.accepted, c.d.reloads, c.d.reloadFailures, c.d.loaded, c.d.configInfo, c.d.spliced,
		c.d.draining, c.d.drainConns, c.d.drainRequests,
		c.d.poolRequests, c.d.poolErrors, c.d.poolClientEOF, c.d.poolClients, c.d.poolFragments, c.d.poolLatency,
		c.d.commandLatency, c.d.slowRequests, c.d.tapSubscribers, c.d.tapLines, c.d.tapDropped, c.d.hotRequests, c.d.hotBytes,
		c.d.beRequests, c.d.beRequestBytes, c.d.beResponses, c.d.beResponseBytes, c.d.beErrors,
		c.d.beConns, c.d.beInQueue, c.d.beOutQueue, c.d.beEjections, c.d.beUp, c.d.beFailures, c.d.beLatency,
		c.d.beRedirects, c.d.beChecks, c.d.beCheckFailures, c.d.beRestores, c.d.beProbing,
	} {
		ch <- d
	}
	c.d.fleet.describe(ch)
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Stats()
	info := c.src.Info()
	m := emitter{ch}
	m.gauge(c.d.buildInfo, 1, st.Version, runtime.Version())
	m.gauge(c.d.start, seconds(st.Start))
	m.counter(c.d.accepted, st.TotalConnections)
	m.counter(c.d.reloads, st.Reloads)
	m.counter(c.d.reloadFailures, st.ReloadFailures)
	m.counter(c.d.spliced, st.SplicedReplies)
	m.gauge(c.d.loaded, seconds(info.LoadedAt))
	m.gauge(c.d.configInfo, 1, info.Source, info.Checksum)
	c.collectDrain(m, st.Drain)
	m.gauge(c.d.tapSubscribers, float64(st.Tap.Subscribers))
	m.counter(c.d.tapLines, int64(st.Tap.Lines))
	m.counter(c.d.tapDropped, int64(st.Tap.Dropped))
	c.d.fleet.collect(m, st.Fleet)
	seen := map[[2]string]bool{} // const metrics must not repeat a label set
	for _, p := range st.Pools {
		if seen[[2]string{p.Name}] {
			continue
		}
		seen[[2]string{p.Name}] = true
		c.collectPool(m, p, seen)
	}
}

// collectDrain emits the drain's gauge and counters.
func (c *Collector) collectDrain(m emitter, d proxy.DrainStats) {
	draining := 0.0
	if d.Draining {
		draining = 1
	}
	m.gauge(c.d.draining, draining)
	m.counter(c.d.drainConns, d.ConnectionsDrained, "drained")
	m.counter(c.d.drainConns, d.ConnectionsHanded, "handed")
	m.counter(c.d.drainConns, d.ConnectionsCut, "cut")
	m.counter(c.d.drainRequests, d.Requests, "answered")
	m.counter(c.d.drainRequests, d.RequestsCut, "cut")
}

func (c *Collector) collectPool(m emitter, p proxy.PoolStats, seen map[[2]string]bool) {
	m.counter(c.d.poolRequests, p.Requests, p.Name)
	for _, e := range poolErrors(p) {
		m.counter(c.d.poolErrors, e.Value, p.Name, e.Kind)
	}
	m.counter(c.d.poolClientEOF, p.ClientEOF, p.Name)
	m.gauge(c.d.poolClients, float64(p.ClientConnections), p.Name)
	m.counter(c.d.poolFragments, p.Fragments, p.Name)
	for _, s := range p.Servers {
		if k := [2]string{p.Name, s.Name}; !seen[k] {
			seen[k] = true
			c.collectBackend(m, p.Name, s)
			if p.Kind == clusterKind {
				m.counter(c.d.beRedirects, s.Moved, p.Name, s.Name, "moved")
				m.counter(c.d.beRedirects, s.Ask, p.Name, s.Name, "ask")
				m.counter(c.d.beRedirects, s.TryAgain, p.Name, s.Name, "tryagain")
			}
		}
	}
	m.histogram(c.d.poolLatency, p.Latency, p.Name)
	m.counter(c.d.slowRequests, p.SlowRequests, p.Name)
	for _, k := range p.HotKeys {
		m.gauge(c.d.hotRequests, float64(k.Requests), p.Name, k.Key)
		m.gauge(c.d.hotBytes, float64(k.Bytes), p.Name, k.Key)
	}
	for _, cl := range p.Commands {
		m.histogram(c.d.commandLatency, proxy.LatencySnapshot{Counts: cl.Counts, Sum: cl.Sum}, p.Name, cl.Command)
	}
	c.d.fleet.collectRing(m, p)
	for _, r := range p.Router {
		c.collectRouter(m, p.Name, r)
	}
	for _, r := range p.Source {
		c.collectSource(m, p.Name, r)
	}
}

// collectSource exports one of the counters of where a pool's servers come
// from (proxy.PoolStats.Source) as shardproxy_<name>: servers_from's
// shardproxy_dns_*.
func (c *Collector) collectSource(m emitter, pool string, r proxy.RouterStat) {
	name := "shardproxy_" + metricName(r.Name)
	if r.Kind == proxy.RouterGauge {
		m.gauge(prometheus.NewDesc(name, r.Help, []string{"pool"}, nil), float64(r.Value), pool)
		return
	}
	m.counter(prometheus.NewDesc(name+"_total", r.Help, []string{"pool"}, nil), r.Value, pool)
}

// collectRouter exports one of a router's counters as
// shardproxy_router_<name> (with _total for a counter), labelled by pool.
// Their names depend on the pool's kind (and a Lua script's mcp.add_stat),
// so they are described as they are collected.
func (c *Collector) collectRouter(m emitter, pool string, r proxy.RouterStat) {
	name := "shardproxy_router_" + metricName(r.Name)
	help := r.Help
	if help == "" {
		help = "A router counter (" + r.Name + ")."
	}
	if r.Kind == proxy.RouterGauge {
		m.gauge(prometheus.NewDesc(name, help, []string{"pool"}, nil), float64(r.Value), pool)
		return
	}
	m.counter(prometheus.NewDesc(name+"_total", help, []string{"pool"}, nil), r.Value, pool)
}

// metricName makes s a valid metric name part: anything but a letter, a
// digit or '_' becomes '_'.
func metricName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (c *Collector) collectBackend(m emitter, pool string, s proxy.ServerStats) {
	l := []string{pool, s.Name}
	m.counter(c.d.beRequests, s.Requests, l...)
	m.counter(c.d.beRequestBytes, s.RequestBytes, l...)
	m.counter(c.d.beResponses, s.Responses, l...)
	m.counter(c.d.beResponseBytes, s.ResponseBytes, l...)
	for _, e := range backendErrors(s) {
		m.counter(c.d.beErrors, e.Value, pool, s.Name, e.Kind)
	}
	m.gauge(c.d.beConns, float64(s.ServerConnections), l...)
	m.gauge(c.d.beInQueue, float64(s.InQueue), l...)
	m.gauge(c.d.beOutQueue, float64(s.OutQueue), l...)
	m.counter(c.d.beEjections, s.Ejects, l...)
	up := 1.0
	if s.State.Bad {
		up = 0
	}
	m.gauge(c.d.beUp, up, l...)
	m.gauge(c.d.beFailures, float64(s.State.Failures), l...)
	m.histogram(c.d.beLatency, s.Latency, l...)
	m.counter(c.d.beChecks, s.Probes, pool, s.Name, "probe")
	m.counter(c.d.beChecks, s.IdleChecks, pool, s.Name, "idle")
	m.counter(c.d.beCheckFailures, s.ProbeFailures, pool, s.Name, "probe")
	m.counter(c.d.beCheckFailures, s.IdleReplaced, pool, s.Name, "idle")
	m.counter(c.d.beRestores, s.Restores, l...)
	m.gauge(c.d.beProbing, float64(b2i(s.State.Probing)), l...)
}

// emitter sends const metrics. A label value that is not valid UTF-8 (a
// config path can be anything) becomes an invalid metric, which the handler
// reports while serving the rest; nothing panics.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) send(d *prometheus.Desc, m prometheus.Metric, err error) {
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	e.ch <- m
}

func (e emitter) counter(d *prometheus.Desc, v int64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	e.send(d, m, err)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...)
	e.send(d, m, err)
}

// histogram converts a backend histogram (a count per bucket, the last one
// for everything slower) to Prometheus's cumulative buckets.
func (e emitter) histogram(d *prometheus.Desc, h proxy.LatencySnapshot, labels ...string) {
	buckets := make(map[float64]uint64, len(latencyBounds))
	var cum uint64
	for i, bound := range latencyBounds {
		cum += uint64(max(h.Counts[i], 0))
		buckets[bound.Seconds()] = cum
	}
	cum += uint64(max(h.Counts[len(latencyBounds)], 0))
	m, err := prometheus.NewConstHistogram(d, cum, h.Sum.Seconds(), buckets, labels...)
	e.send(d, m, err)
}

// seconds is t in seconds since the epoch, 0 for the zero time.
func seconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}
