package backend

// A Registry keeps each scope's counters whole across reloads. The
// backends of one scope and name (a pool's server) follow one another: a
// reload that changes a server's options makes a new backend beside the
// old one, a reload that removes a server closes its backend, and a later
// one may add it back. Totals adds up, per name, every backend the
// registry made for it: the live ones, the draining ones and the closed
// ones, whose final counts it keeps. So a series per server, and a pool's
// sum over its servers, never goes backwards, which Prometheus would read
// as a counter reset (a false spike in rate()).
//
// Memory stays bounded however many servers reloads churn through: a scope
// keeps the counts of at most RetainNames names that have no live backend
// (the longest idle go first, their counts added to the scope's "gone"
// total so its sum stays whole), and at most maxIdleScopes scopes without
// a live backend (a removed pool; the longest idle go first, entirely). A
// name or scope dropped that comes back starts again from zero, as a new
// series would.

// DefaultRetainNames is Registry.RetainNames's default.
const DefaultRetainNames = 256

// maxIdleScopes bounds the scopes without a live backend whose counts a
// Registry keeps.
const maxIdleScopes = 64

// Counts are a backend's counters as plain numbers: Stats without its
// gauges (connections, queues) and its last ejection time.
type Counts struct {
	Requests, RequestBytes, Responses, ResponseBytes int64
	Timeouts, EOF, Errors, Failures, Ejects          int64
	// Moved, Ask and TryAgain count the Redis Cluster replies of those
	// kinds the server sent and a cluster router followed (Stats).
	Moved, Ask, TryAgain int64
	// Probes, ProbeFailures, Restores, IdleChecks and IdleReplaced are
	// the health checks' (Stats).
	Probes, ProbeFailures, Restores, IdleChecks, IdleReplaced int64
	// Latency is Histogram's counts; LatencySum its sum in nanoseconds.
	Latency    [len(LatencyBuckets) + 1]int64
	LatencySum int64
}

// Counts returns the counters now. Each is read atomically on its own, so
// a sum of buckets may be ahead of an earlier read of another field; no
// value is ever less than one read before.
func (s *Stats) Counts() Counts {
	c := Counts{
		Requests: s.Requests.Load(), RequestBytes: s.RequestBytes.Load(),
		Responses: s.Responses.Load(), ResponseBytes: s.ResponseBytes.Load(),
		Timeouts: s.Timeouts.Load(), EOF: s.EOF.Load(), Errors: s.Errors.Load(),
		Failures: s.Failures.Load(), Ejects: s.Ejects.Load(),
		Moved: s.Moved.Load(), Ask: s.Ask.Load(), TryAgain: s.TryAgain.Load(),
		Probes: s.Probes.Load(), ProbeFailures: s.ProbeFailures.Load(), Restores: s.Restores.Load(),
		IdleChecks: s.IdleChecks.Load(), IdleReplaced: s.IdleReplaced.Load(),
		LatencySum: s.Latency.Sum.Load(),
	}
	for i := range c.Latency {
		c.Latency[i] = s.Latency.Counts[i].Load()
	}
	return c
}

// Add adds o to c.
func (c *Counts) Add(o Counts) {
	c.Requests += o.Requests
	c.RequestBytes += o.RequestBytes
	c.Responses += o.Responses
	c.ResponseBytes += o.ResponseBytes
	c.Timeouts += o.Timeouts
	c.EOF += o.EOF
	c.Errors += o.Errors
	c.Failures += o.Failures
	c.Ejects += o.Ejects
	c.Moved += o.Moved
	c.Ask += o.Ask
	c.TryAgain += o.TryAgain
	c.Probes += o.Probes
	c.ProbeFailures += o.ProbeFailures
	c.Restores += o.Restores
	c.IdleChecks += o.IdleChecks
	c.IdleReplaced += o.IdleReplaced
	for i := range c.Latency {
		c.Latency[i] += o.Latency[i]
	}
	c.LatencySum += o.LatencySum
}

// Totals are a scope's counters over every backend the registry made for
// it.
type Totals struct {
	// All adds up every backend the scope ever had, including names
	// dropped to stay within RetainNames.
	All Counts

	index  map[string]int // name -> counts
	counts []Counts
}

// Of returns the counts of the backends named name, added up, and false
// when the scope keeps none.
func (t *Totals) Of(name string) (Counts, bool) {
	i, ok := t.index[name]
	if !ok {
		return Counts{}, false
	}
	return t.counts[i], true
}

// add adds c to name's counts and to All.
func (t *Totals) add(name string, c Counts) {
	i, ok := t.index[name]
	if !ok {
		i = len(t.counts)
		t.index[name] = i
		t.counts = append(t.counts, Counts{})
	}
	t.counts[i].Add(c)
	t.All.Add(c)
}

// tally is one scope's backends and kept counts. Guarded by Registry.mu.
type tally struct {
	live  map[*Backend]string // made and not yet closed: its name
	kept  map[string]*keptCounts
	gone  Counts         // counts of names dropped from kept
	idle  uint64         // when the scope's last live backend closed (Registry.seq); 0 while it has one
	names map[string]int // live backends by name
}

// keptCounts are the final counts of a name's closed backends.
type keptCounts struct {
	Counts
	idle uint64 // when its last live backend closed (Registry.seq); 0 while it has one
}

// tallyLocked returns scope's tally, made on first use.
func (r *Registry) tallyLocked(scope string) *tally {
	if r.tallies == nil {
		r.tallies = map[string]*tally{}
	}
	t := r.tallies[scope]
	if t == nil {
		t = &tally{live: map[*Backend]string{}, kept: map[string]*keptCounts{}, names: map[string]int{}}
		r.tallies[scope] = t
	}
	return t
}

// madeLocked counts b, just made for scope, from now on.
func (r *Registry) madeLocked(scope string, b *Backend) {
	t := r.tallyLocked(scope)
	name := b.Name()
	t.live[b] = name
	t.names[name]++
	t.idle = 0
	if k := t.kept[name]; k != nil {
		k.idle = 0
	}
}

// closed keeps the final counts of b, a backend of scope that has closed,
// and drops the longest idle names and scopes beyond the bounds.
func (r *Registry) closed(scope string, b *Backend) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tallies[scope]
	if t == nil {
		return
	}
	name, ok := t.live[b]
	if !ok {
		return
	}
	delete(t.live, b)
	r.seq++
	k := t.kept[name]
	if k == nil {
		k = &keptCounts{}
		t.kept[name] = k
	}
	k.Add(b.stats.Counts())
	if t.names[name]--; t.names[name] == 0 {
		delete(t.names, name)
		k.idle = r.seq
		t.trim(r.retainNames())
	}
	if len(t.live) == 0 {
		t.idle = r.seq
		r.trimScopesLocked()
	}
}

// trim drops the longest idle names while more than limit are idle.
func (t *tally) trim(limit int) {
	for {
		idle, oldest := 0, ""
		for name, k := range t.kept {
			if k.idle == 0 {
				continue
			}
			idle++
			if oldest == "" || k.idle < t.kept[oldest].idle {
				oldest = name
			}
		}
		if idle <= limit {
			return
		}
		t.gone.Add(t.kept[oldest].Counts)
		delete(t.kept, oldest)
	}
}

// trimScopesLocked drops the longest idle scopes while more than
// maxIdleScopes are idle.
func (r *Registry) trimScopesLocked() {
	for {
		idle, oldest := 0, ""
		for scope, t := range r.tallies {
			if t.idle == 0 {
				continue
			}
			idle++
			if oldest == "" || t.idle < r.tallies[oldest].idle {
				oldest = scope
			}
		}
		if idle <= maxIdleScopes {
			return
		}
		delete(r.tallies, oldest)
	}
}

func (r *Registry) retainNames() int {
	if r.RetainNames > 0 {
		return r.RetainNames
	}
	return DefaultRetainNames
}

// Totals returns scope's counters: per name, every backend of that name
// the registry made for scope (live, draining or closed) added up, and
// their sum. Nothing it returns is ever less than in an earlier call,
// except a name dropped to stay within RetainNames (its counts stay in
// All). Safe for concurrent use.
func (r *Registry) Totals(scope string) Totals {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.tallies[scope]
	if t == nil {
		return Totals{}
	}
	n := len(t.kept) + len(t.names)
	tot := Totals{All: t.gone, index: make(map[string]int, n), counts: make([]Counts, 0, n)}
	for name, k := range t.kept {
		tot.add(name, k.Counts)
	}
	for b, name := range t.live {
		tot.add(name, b.stats.Counts())
	}
	return tot
}
