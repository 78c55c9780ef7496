package backend

import (
	"math"
	"sync/atomic"
	"time"
)

// Stats are a backend's counters, named after twemproxy's server stats.
// Fields are updated atomically and may be read at any time.
type Stats struct {
	Requests      atomic.Int64 // requests sent (or queued to send)
	RequestBytes  atomic.Int64
	Responses     atomic.Int64 // replies received
	ResponseBytes atomic.Int64
	Timeouts      atomic.Int64 // requests failed by timeout (server_timedout)
	EOF           atomic.Int64 // sockets closed by the server (server_eof)
	Errors        atomic.Int64 // other socket failures (server_err)
	Failures      atomic.Int64 // all socket failures
	Ejects        atomic.Int64 // times marked bad
	EjectedAt     atomic.Int64 // unix micros of the last mark-bad (server_ejected_at)
	Connections   atomic.Int64 // open sockets (server_connections)
	InQueue       atomic.Int64 // requests queued, not yet written (in_queue)
	OutQueue      atomic.Int64 // requests written, awaiting reply (out_queue)
	// Moved, Ask and TryAgain count the Redis Cluster replies of those
	// kinds this server sent that a cluster router followed; package
	// cluster counts them, the backend never does.
	Moved, Ask, TryAgain atomic.Int64
	// Probes counts the probes of the backend while it was bad
	// (Config.HealthInterval), ProbeFailures those that failed, and
	// Restores the times a probe brought it back.
	Probes, ProbeFailures, Restores atomic.Int64
	// IdleChecks counts the checks of idle sockets, IdleReplaced the
	// sockets dropped because their check failed (a new one is dialled
	// for the next call).
	IdleChecks, IdleReplaced atomic.Int64
	// Latency counts replies by the time from Send to the reply.
	Latency Histogram
}

// LatencyBuckets are the upper bounds of Histogram's buckets.
var LatencyBuckets = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond,
}

// Histogram is a fixed-bucket latency histogram updated with atomics, so the
// hot path never locks. Counts[i] counts observations <= LatencyBuckets[i];
// the last count is the overflow bucket.
type Histogram struct {
	Counts [len(LatencyBuckets) + 1]atomic.Int64
	Sum    atomic.Int64 // nanoseconds
}

// bucket is the index in Histogram.Counts that d counts in.
func bucket(d time.Duration) int {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	return i
}

// Observe counts d in h.
func (h *Histogram) Observe(d time.Duration) {
	h.Counts[bucket(d)].Add(1)
	h.Sum.Add(int64(d))
}

// Add adds n observations of d's bucket, and sum to the sum: what a
// caller that gathers a batch's observations adds at once.
func (h *Histogram) Add(bucket int, n, sum int64) {
	h.Counts[bucket].Add(n)
	h.Sum.Add(sum)
}

// Bucket returns the index in Histogram.Counts that d counts in.
func Bucket(d time.Duration) int { return bucket(d) }

// observations are durations recorded together, then added to a
// Histogram at once: the replies of one read add to each bucket they
// fall in once, rather than twice per reply.
type observations struct {
	counts [len(LatencyBuckets) + 1]int64
	sum    int64
}

func (o *observations) observe(d time.Duration) {
	o.counts[bucket(d)]++
	o.sum += int64(d)
}

// addTo adds the observations to h.
func (o *observations) addTo(h *Histogram) {
	for i, n := range o.counts {
		if n > 0 {
			h.Counts[i].Add(n)
		}
	}
	h.Sum.Add(o.sum)
}

// Stats returns the backend's live counters.
func (b *Backend) Stats() *Stats { return &b.stats }

// State is a backend's health as operators see it.
type State struct {
	// Bad is true while the backend fails fast.
	Bad bool
	// RetryAt is when a bad backend will be tried again.
	RetryAt time.Time
	// Failures is the count of consecutive failures.
	Failures int
	// LastCause is the cause of the last failure, if any.
	LastCause string
	// Probing is true while a bad backend's retry time has passed and it
	// waits for a probe to succeed (Config.HealthInterval); RetryAt is
	// then when the next probe starts.
	Probing bool
}

// State returns the backend's health now.
func (b *Backend) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := State{Failures: b.failures}
	if b.failures > 0 || b.bad {
		st.LastCause = b.lastCause.String()
	}
	switch until := b.badUntil.Load(); {
	case b.probing:
		st.Bad, st.Probing = true, true
		st.RetryAt = b.nextProbe
	case until == math.MaxInt64: // waiting for the first probe
		st.Bad = true
		st.RetryAt = b.nextProbe
	case until != 0 && time.Now().UnixNano() < until:
		st.Bad = true
		st.RetryAt = time.Unix(0, until)
	}
	return st
}
