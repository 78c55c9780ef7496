package admin

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"shardproxy/config"
	"shardproxy/proxy"
)

// statusView is what the status page shows, and GET /status's JSON: the
// newest sample, with rates and quantiles over the span since the oldest
// sample kept (Window) and graphs of the last minutes.
type statusView struct {
	Version  string    `json:"version"`
	Now      time.Time `json:"now"`
	Start    time.Time `json:"started_at"`
	Source   string    `json:"config_source"`
	Checksum string    `json:"config_checksum"`
	LoadedAt time.Time `json:"config_loaded_at"`
	Reloads  int64     `json:"reloads"`
	Clients  int64     `json:"client_connections"`
	// Window is the span, in seconds, the rates and quantiles cover.
	Window float64 `json:"window_seconds"`
	// Fleet is the fleet the proxy belongs to; nil without one.
	Fleet *fleetView `json:"fleet,omitempty"`
	Pools []poolView `json:"pools"`
}

type poolView struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"` // config.Kind: sharded, redis_cluster, lua
	Protocol string `json:"protocol"`
	Listen   string `json:"listen"`
	// Eject says what happens to a bad server's keys.
	Eject   string       `json:"eject"`
	Clients int64        `json:"client_connections"`
	Rates   rates        `json:"rates"`
	Errors  []errorCount `json:"errors"`
	// Slots are a Redis Cluster pool's slot owners, one per master.
	Slots []slotOwner `json:"slots,omitempty"`
	// Ring is a ring pool's ring under a fleet (status_fleet.go).
	Ring *ringView `json:"ring,omitempty"`
	// Router are the router's counters (a cluster's redirects and
	// refreshes, a Lua route's own), with their rates.
	Router []errorCount `json:"router,omitempty"`
	// Source are the figures of where the pool's servers come from
	// (servers_from's dns_*), with their rates.
	Source  []errorCount `json:"source,omitempty"`
	Servers []serverView `json:"servers"`
	Graph   []graphPoint `json:"graph"`
	// Slowlog is the pool's slowlog, newest first (the page shows
	// pageSlowlog entries), when the Source is an Observer.
	Slowlog *slowlogPool `json:"slowlog,omitempty"`
	// HotKeys are the pool's most requested keys over the last 10
	// seconds (hot_keys), most requested first.
	HotKeys []hotKey `json:"hot_keys,omitempty"`
}

// hotKey is one of a pool's hot keys.
type hotKey struct {
	Key      string `json:"key"`
	Requests uint64 `json:"requests"`
	Bytes    uint64 `json:"bytes"`
}

type serverView struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// State is up, failing (failures below the limit), bad (failing fast),
	// ejected (bad, and out of the pool's distribution) or probing (bad
	// past its retry time, until a health probe succeeds).
	State     string       `json:"state"`
	Failures  int          `json:"failures"`
	LastCause string       `json:"last_cause,omitempty"`
	RetryAt   *time.Time   `json:"retry_at,omitempty"`
	Ejects    int64        `json:"ejects"`
	Conns     int64        `json:"connections"`
	InQueue   int64        `json:"in_queue"`
	OutQueue  int64        `json:"out_queue"`
	Rates     rates        `json:"rates"`
	Errors    []errorCount `json:"errors"`
	Graph     []graphPoint `json:"graph"`
}

// rates are figures over the window. P50 and P99 are reply latencies in
// seconds, absent when no reply came in the window.
type rates struct {
	RPS optFloat `json:"requests_per_second"`
	EPS optFloat `json:"errors_per_second"`
	P50 *float64 `json:"p50_seconds,omitempty"`
	P99 *float64 `json:"p99_seconds,omitempty"`
}

// errorCount is a counter since start and its rate over the window.
type errorCount struct {
	Kind   string   `json:"kind"`
	Total  int64    `json:"total"`
	PerSec optFloat `json:"per_second"`
}

// slotOwner is one master's share of the slot map.
type slotOwner struct {
	Master string   `json:"master"`
	Count  int      `json:"count"`
	Ranges []string `json:"ranges"` // "first-last" or "slot"
}

// graphPoint is one sample of a graph.
type graphPoint struct {
	At        time.Time `json:"t"`
	RPS       optFloat  `json:"rps"`
	EPS       optFloat  `json:"eps"`
	Redirects optFloat  `json:"redirects"`
}

// optFloat is a number that is NaN where there is none: JSON null, "-"
// on the page.
type optFloat float64

// MarshalJSON writes null for NaN.
func (f optFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(f), 'g', 6, 64), nil
}

// view builds the page from the history and the running config.
func (h *history) view(info proxy.Info) statusView {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return statusView{}
	}
	cur, old := h.newest(), h.oldest()
	dt := cur.Now.Sub(old.Now).Seconds()
	v := statusView{Version: cur.Version, Now: cur.Now, Start: cur.Start, Source: info.Source,
		Checksum: info.Checksum, LoadedAt: info.LoadedAt, Reloads: cur.Reloads,
		Clients: cur.CurrConnections, Window: dt, Fleet: fleetViewOf(cur.Fleet)}
	for i := range cur.Pools {
		p := &cur.Pools[i]
		var pc *config.Pool
		if info.Config != nil {
			pc = info.Config.Pool(p.Name)
		}
		v.Pools = append(v.Pools, h.poolView(p, findPool(old.Pools, p.Name), pc, dt))
	}
	return v
}

// poolView builds one pool's part; old is the pool at the window's start
// (nil if it was not running), pc its configuration (nil if unknown).
func (h *history) poolView(p, old *proxy.PoolStats, pc *config.Pool, dt float64) poolView {
	pv := poolView{Name: p.Name, Protocol: p.Protocol, Clients: p.ClientConnections,
		Graph: h.graph(seriesKey{pool: p.Name}), Slots: slotOwners(p.Slots)}
	var oldP proxy.PoolStats
	if old != nil {
		oldP = *old
	}
	pv.Errors = perSec(poolErrors(*p), poolErrors(oldP), old != nil, dt)
	pv.Rates = windowRates(p.Requests, oldP.Requests, pv.Errors, p.Latency, oldP.Latency, old != nil, dt)
	pv.Router = counterRates(p.Router, oldP.Router, old != nil, dt)
	pv.Source = counterRates(p.Source, oldP.Source, old != nil, dt)
	ejects := false
	if pc != nil {
		pv.Kind, pv.Listen = string(pc.Kind()), pc.Listen.Addr
		pv.Eject, ejects = ejectPolicy(pc)
	}
	for i := range p.Servers {
		s := &p.Servers[i]
		var os *proxy.ServerStats
		if old != nil {
			os = findServer(old.Servers, s.Name)
		}
		pv.Servers = append(pv.Servers, h.serverView(p.Name, s, os, ejects, dt))
	}
	applyRing(&pv, p)
	for _, k := range p.HotKeys {
		pv.HotKeys = append(pv.HotKeys, hotKey{Key: k.Key, Requests: k.Requests, Bytes: k.Bytes})
	}
	return pv
}

// ejectPolicy describes what happens to a bad server's keys in pc, and
// whether the pool takes bad servers out of its distribution.
func ejectPolicy(pc *config.Pool) (string, bool) {
	switch {
	case pc.Kind() == config.KindCluster:
		return "a bad node's slots fail fast until the cluster fails it over", false
	case pc.Kind() == config.KindLua:
		return "the route file decides", false
	case !pc.AutoEjectHosts || pc.EjectPolicy == config.EjectFailFast:
		return "a bad server's keys fail fast", false
	case pc.EjectPolicy == config.EjectFailover:
		return "a bad server's keys go to pool " + pc.FailoverPool, false
	}
	return "a bad server is ejected: its keys move to the others", true
}

func (h *history) serverView(pool string, s, old *proxy.ServerStats, ejects bool, dt float64) serverView {
	sv := serverView{Name: s.Name, Addr: s.Addr, State: state(*s), Failures: s.State.Failures,
		LastCause: s.State.LastCause, Ejects: s.Ejects, Conns: s.ServerConnections,
		InQueue: s.InQueue, OutQueue: s.OutQueue, Graph: h.graph(seriesKey{pool, s.Name})}
	if sv.State == stateBad && ejects {
		sv.State = stateEjected
	}
	if s.State.Bad && !s.State.RetryAt.IsZero() {
		t := s.State.RetryAt.UTC()
		sv.RetryAt = &t
	}
	var o proxy.ServerStats
	if old != nil {
		o = *old
	}
	sv.Errors = perSec(backendErrors(*s), backendErrors(o), old != nil, dt)
	sv.Rates = windowRates(s.Requests, o.Requests, sv.Errors, s.Latency, o.Latency, old != nil, dt)
	return sv
}

// perSec pairs counters with their rates over the window (NaN without a
// start or after a reset).
func perSec(now, old [3]countKind, haveOld bool, dt float64) []errorCount {
	out := make([]errorCount, len(now))
	for i, c := range now {
		out[i] = errorCount{Kind: c.Kind, Total: c.Value, PerSec: optFloat(math.NaN())}
		if haveOld {
			out[i].PerSec = optFloat(perSecond(c.Value, old[i].Value, dt))
		}
	}
	return out
}

// windowRates are the requests, errors and latency quantiles over the
// window.
func windowRates(req, oldReq int64, errs []errorCount, lat, oldLat proxy.LatencySnapshot, haveOld bool, dt float64) rates {
	r := rates{RPS: optFloat(math.NaN()), EPS: optFloat(math.NaN())}
	if !haveOld || dt <= 0 {
		return r
	}
	r.RPS = optFloat(perSecond(req, oldReq, dt))
	r.EPS = 0
	for _, e := range errs {
		r.EPS += e.PerSec
	}
	var d [len(proxy.LatencyBuckets) + 1]int64
	for i := range d {
		d[i] = lat.Counts[i] - oldLat.Counts[i]
	}
	r.P50, r.P99 = quantile(d[:], 0.5), quantile(d[:], 0.99)
	return r
}

// quantile estimates the q-quantile, in seconds, of a histogram of counts
// per latency bucket (the last one: slower than every bound), as
// Prometheus's histogram_quantile does over /metrics: linear within the
// bucket, the highest bound for the last one. nil when it is empty or a
// count went backwards.
func quantile(counts []int64, q float64) *float64 {
	var total int64
	for _, c := range counts {
		if c < 0 {
			return nil
		}
		total += c
	}
	if total == 0 {
		return nil
	}
	rank := q * float64(total)
	var cum int64
	for i, c := range counts {
		if float64(cum+c) < rank || c == 0 {
			cum += c
			continue
		}
		if i == len(proxy.LatencyBuckets) {
			break
		}
		lo := 0.0
		if i > 0 {
			lo = proxy.LatencyBuckets[i-1].Seconds()
		}
		hi := proxy.LatencyBuckets[i].Seconds()
		v := lo + (hi-lo)*(rank-float64(cum))/float64(c)
		return &v
	}
	v := proxy.LatencyBuckets[len(proxy.LatencyBuckets)-1].Seconds()
	return &v
}

// slotOwners groups a cluster's slot ranges by master, masters in the
// order of their first slot.
func slotOwners(slots []proxy.SlotRange) []slotOwner {
	var out []slotOwner
	idx := map[string]int{}
	for _, r := range slots {
		i, ok := idx[r.Master]
		if !ok {
			i = len(out)
			idx[r.Master] = i
			out = append(out, slotOwner{Master: r.Master})
		}
		o := &out[i]
		o.Count += r.Last - r.First + 1
		if r.First == r.Last {
			o.Ranges = append(o.Ranges, strconv.Itoa(r.First))
		} else {
			o.Ranges = append(o.Ranges, fmt.Sprintf("%d-%d", r.First, r.Last))
		}
	}
	return out
}

// Formatting for the page.

// fmtRate shows a rate per second: "-" when unknown.
func fmtRate(f optFloat) string {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return "-"
	case v == 0:
		return "0"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// fmtUsec shows a time in microseconds in ms or µs.
func fmtUsec(us int64) string {
	if us >= 1000 {
		return strconv.FormatFloat(float64(us)/1e3, 'f', 1, 64) + " ms"
	}
	return strconv.FormatInt(us, 10) + " µs"
}

// fmtLatency shows a latency in seconds in ms or µs; "-" when absent.
func fmtLatency(v *float64) string {
	switch {
	case v == nil:
		return "-"
	case *v >= proxy.LatencyBuckets[len(proxy.LatencyBuckets)-1].Seconds():
		return "> " + proxy.LatencyBuckets[len(proxy.LatencyBuckets)-1].String()
	case *v >= 1e-3:
		return strconv.FormatFloat(*v*1e3, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(*v*1e6, 'f', 0, 64) + " µs"
}

// fmtSince shows how long ago t was, to the second.
func fmtSince(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return now.Sub(t).Truncate(time.Second).String()
}

// fmtRetry shows a bad server's retry time and how far off it is.
func fmtRetry(now time.Time, t *time.Time) string {
	if t == nil {
		return ""
	}
	in := t.Sub(now).Round(100 * time.Millisecond)
	return "retrying at " + t.Format("15:04:05 MST") + " (in " + in.String() + ")"
}

// fmtProbe tells when a probing server's next health probe starts.
func fmtProbe(now time.Time, t *time.Time) string {
	if t == nil {
		return ""
	}
	in := max(t.Sub(now).Round(100*time.Millisecond), 0)
	return "failing fast until a health probe succeeds; next at " + t.Format("15:04:05 MST") + " (in " + in.String() + ")"
}

// graphPath draws a graph's values (picked by f) as an SVG path in a box
// of graphLen by graphHeight units, newest at the right, scaled to the
// largest value; a gap breaks the line. y is rounded to whole units (a
// graph is 24 to 40 pixels high) and a flat run is one segment, which
// keeps the page small. It returns the path and that largest value.
func graphPath(g []graphPoint, f func(graphPoint) optFloat) (string, float64) {
	var top float64
	for _, p := range g {
		if v := float64(f(p)); v > top {
			top = v
		}
	}
	var seg [][2]int // the line being drawn
	var b []byte
	flush := func() {
		for i, pt := range seg {
			op := byte('L')
			if i == 0 {
				op = 'M'
			}
			b = append(b, op)
			b = strconv.AppendInt(b, int64(pt[0]), 10)
			b = append(b, ' ')
			b = strconv.AppendInt(b, int64(pt[1]), 10)
		}
		seg = seg[:0]
	}
	for i, p := range g {
		v := float64(f(p))
		if math.IsNaN(v) {
			flush()
			continue
		}
		y := graphHeight - 1
		if top > 0 {
			y -= int(math.Round(v / top * (graphHeight - 2)))
		}
		x := graphLen - len(g) + i
		if n := len(seg); n >= 2 && seg[n-1][1] == y && seg[n-2][1] == y {
			seg[n-1][0] = x // the flat run goes on
			continue
		}
		seg = append(seg, [2]int{x, y})
	}
	flush()
	return string(b), top
}

// graphHeight is a graph's height in SVG units.
const graphHeight = 30

// counterRates are counters (a router's, a pool's source's) with the rate
// of each counter since old, when there is an old.
func counterRates(now, old []proxy.RouterStat, hasOld bool, dt float64) []errorCount {
	var out []errorCount
	for _, r := range now {
		c := errorCount{Kind: r.Name, Total: r.Value, PerSec: optFloat(math.NaN())}
		if r.Kind == proxy.RouterCounter && hasOld {
			for _, o := range old {
				if o.Name == r.Name {
					c.PerSec = optFloat(perSecond(r.Value, o.Value, dt))
				}
			}
		}
		out = append(out, c)
	}
	return out
}
