package admin

import (
	"math"
	"sync"
	"time"

	"shardproxy/proxy"
)

// The status page's memory of the last minutes.
const (
	// sampleEvery is how often the HTTP admin reads the proxy's Stats for
	// the status page.
	sampleEvery = time.Second
	// graphLen is how many samples a graph shows: five minutes.
	graphLen = 300
	// recentLen is how many whole Stats are kept: the page's rates and
	// quantiles are over the span from the oldest to the newest (10 s).
	recentLen = 11
)

// point is one sample of a graph: rates per second since the sample
// before; NaN where there is none (the first sample, a gap, a reset).
type point struct {
	rps, eps, redirects float32
}

var gap = point{float32(math.NaN()), float32(math.NaN()), float32(math.NaN())}

// series is one pool's or server's graph: a ring of graphLen points.
type series struct {
	pts  [graphLen]point
	last uint64 // the sample that wrote last
}

// history keeps the samples the status page draws: the last recentLen
// Stats whole, and per pool and server a ring of graph points. Its memory
// is bounded by the pools and servers of the last graphLen samples: a
// series no sample has written for that long is dropped. Safe for
// concurrent use.
type history struct {
	src Source

	mu     sync.Mutex // guards the fields below
	n      uint64     // samples taken; sample k lives at index k%graphLen (and k%recentLen)
	at     [graphLen]time.Time
	recent [recentLen]proxy.Stats
	series map[seriesKey]*series
}

// seriesKey names a series: a pool (server "") or one of its servers.
type seriesKey struct{ pool, server string }

func newHistory(src Source) *history {
	return &history{src: src, series: map[seriesKey]*series{}}
}

// run samples every sampleEvery until stop closes.
func (h *history) run(stop <-chan struct{}) {
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			h.sample()
		}
	}
}

// fresh samples unless the newest sample is recent; a server without the
// sampling goroutine (Handler alone) samples as the page is read.
func (h *history) fresh() {
	h.mu.Lock()
	stale := h.n == 0 || time.Since(h.newest().Now) > sampleEvery*3/2
	h.mu.Unlock()
	if stale {
		h.sample()
	}
}

// sample reads the Stats and adds them.
func (h *history) sample() { h.add(h.src.Stats()) }

// add records st as the newest sample. A sample taken less than half an
// interval after the one before (two samplers racing) is dropped, as its
// rates would be noise.
func (h *history) add(st proxy.Stats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var prev *proxy.Stats
	if h.n > 0 {
		prev = h.newest()
		if st.Now.Sub(prev.Now) < sampleEvery/2 {
			return
		}
	}
	h.n++
	h.at[h.n%graphLen] = st.Now
	h.recent[h.n%recentLen] = st
	var dt time.Duration
	if prev != nil {
		dt = st.Now.Sub(prev.Now)
	}
	for i := range st.Pools {
		p := &st.Pools[i]
		var pp *proxy.PoolStats
		if prev != nil {
			pp = findPool(prev.Pools, p.Name)
		}
		h.put(seriesKey{pool: p.Name}, poolPoint(p, pp, dt))
		for j := range p.Servers {
			s := &p.Servers[j]
			var ps *proxy.ServerStats
			if pp != nil {
				ps = findServer(pp.Servers, s.Name)
			}
			h.put(seriesKey{p.Name, s.Name}, serverPoint(s, ps, dt))
		}
	}
	for k, se := range h.series {
		if h.n-se.last >= graphLen {
			delete(h.series, k)
		}
	}
}

// newest returns the newest sample; h.n must be > 0. Called with h.mu held.
func (h *history) newest() *proxy.Stats { return &h.recent[h.n%recentLen] }

// oldest returns the oldest whole sample kept. Called with h.mu held.
func (h *history) oldest() *proxy.Stats {
	k := h.n - min(h.n-1, recentLen-1)
	return &h.recent[k%recentLen]
}

// put writes pt as key's point of sample h.n, marking the samples it
// missed as gaps. Called with h.mu held.
func (h *history) put(key seriesKey, pt point) {
	se := h.series[key]
	if se == nil {
		se = &series{}
		for i := range se.pts {
			se.pts[i] = gap
		}
		h.series[key] = se
	} else {
		for k := max(se.last+1, h.n-min(h.n, graphLen-1)); k < h.n; k++ {
			se.pts[k%graphLen] = gap
		}
	}
	se.pts[h.n%graphLen] = pt
	se.last = h.n
}

// graph returns key's points of the last graphLen samples, oldest first.
// Called with h.mu held.
func (h *history) graph(key seriesKey) []graphPoint {
	se := h.series[key]
	if se == nil {
		return nil
	}
	first := h.n - min(h.n-1, graphLen-1)
	g := make([]graphPoint, 0, h.n-first+1)
	for k := first; k <= h.n; k++ {
		pt := gap
		if k <= se.last {
			pt = se.pts[k%graphLen]
		}
		g = append(g, graphPoint{At: h.at[k%graphLen], RPS: optFloat(pt.rps), EPS: optFloat(pt.eps),
			Redirects: optFloat(pt.redirects)})
	}
	return g
}

// poolPoint is p's graph point against the sample before (nil: none),
// dt after it.
func poolPoint(p, prev *proxy.PoolStats, dt time.Duration) point {
	if prev == nil || dt <= 0 {
		return gap
	}
	sec := dt.Seconds()
	return point{
		rps:       rate(p.Requests, prev.Requests, sec),
		eps:       rate(errorSum(poolErrors(*p)), errorSum(poolErrors(*prev)), sec),
		redirects: redirectRate(p, prev, sec),
	}
}

// redirectRate is a Redis Cluster pool's redirects per second; NaN for
// other pools, which have no such counters.
func redirectRate(p, prev *proxy.PoolStats, sec float64) float32 {
	n, ok := redirects(p.Router)
	if !ok {
		return float32(math.NaN())
	}
	old, _ := redirects(prev.Router)
	return rate(n, old, sec)
}

// serverPoint is s's graph point against the sample before (nil: none),
// dt after it.
func serverPoint(s, prev *proxy.ServerStats, dt time.Duration) point {
	if prev == nil || dt <= 0 {
		return gap
	}
	sec := dt.Seconds()
	return point{
		rps:       rate(s.Requests, prev.Requests, sec),
		eps:       rate(errorSum(backendErrors(*s)), errorSum(backendErrors(*prev)), sec),
		redirects: float32(math.NaN()),
	}
}

// perSecond is the change from old to v per second over dt seconds; NaN
// when a counter went backwards (a reload replaced it) or dt is not
// positive.
func perSecond(v, old int64, dt float64) float64 {
	if v < old || dt <= 0 {
		return math.NaN()
	}
	return float64(v-old) / dt
}

// rate is perSecond as a graph point stores it.
func rate(v, old int64, dt float64) float32 { return float32(perSecond(v, old, dt)) }

func errorSum(c [3]countKind) int64 { return c[0].Value + c[1].Value + c[2].Value }

// Names of the Redis Cluster router counters the page shows as redirects.
var redirectCounters = []string{"cluster_moved", "cluster_ask"}

// redirects is the sum of a router's redirect counters; false when it has
// none.
func redirects(r []proxy.RouterStat) (n int64, ok bool) {
	for _, st := range r {
		for _, name := range redirectCounters {
			if st.Name == name {
				n += st.Value
				ok = true
			}
		}
	}
	return n, ok
}

func findPool(ps []proxy.PoolStats, name string) *proxy.PoolStats {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

func findServer(ss []proxy.ServerStats, name string) *proxy.ServerStats {
	for i := range ss {
		if ss[i].Name == name {
			return &ss[i]
		}
	}
	return nil
}
