package cluster

import (
	"sync/atomic"
	"time"
)

// counters are a Cluster's live counters.
type counters struct {
	moved, ask, tryAgain, clusterDown atomic.Int64
	redirectLimit, badRedirect        atomic.Int64
	crossSlot, fragments              atomic.Int64
	refreshes, refreshFailures        atomic.Int64
	failed                            atomic.Int64
}

// Stats is a snapshot of a Cluster's counters and state, for the admin
// endpoints and tests. Counters count since New.
type Stats struct {
	// Moved counts MOVED replies followed; Ask, ASK replies followed.
	Moved, Ask int64
	// TryAgain counts -TRYAGAIN replies retried.
	TryAgain int64
	// ClusterDown counts -CLUSTERDOWN replies from nodes (passed to clients).
	ClusterDown int64
	// RedirectLimit counts requests answered with an error after
	// MaxRedirects redirects; BadRedirect, malformed MOVED or ASK replies
	// (not followed, passed to the client).
	RedirectLimit, BadRedirect int64
	// CrossSlot counts requests refused with -CROSSSLOT.
	CrossSlot int64
	// Failed counts requests (and parts of split ones) the proxy answered
	// with an error of its own: a node that failed, no slot map, no slot
	// owner, too many redirects.
	Failed int64
	// Fragments counts the per-slot parts of split multi-key requests.
	Fragments int64
	// Refreshes counts slot maps read; RefreshFailures, refreshes in which
	// no node gave a map.
	Refreshes, RefreshFailures int64
	// Ready is true once a slot map is in use.
	Ready bool
	// Shards, Masters and SlotsCovered describe the map in use; Nodes is
	// how many node backends it uses.
	Shards, Masters, SlotsCovered, Nodes int
	// LastRefresh is when the last map was read; LastError says why the
	// latest refresh failed ("" when it succeeded).
	LastRefresh time.Time
	LastError   string
}

// Stats returns the cluster's counters and state now.
func (c *Cluster) Stats() Stats {
	s := Stats{
		Moved:           c.stats.moved.Load(),
		Ask:             c.stats.ask.Load(),
		TryAgain:        c.stats.tryAgain.Load(),
		ClusterDown:     c.stats.clusterDown.Load(),
		RedirectLimit:   c.stats.redirectLimit.Load(),
		BadRedirect:     c.stats.badRedirect.Load(),
		CrossSlot:       c.stats.crossSlot.Load(),
		Failed:          c.stats.failed.Load(),
		Fragments:       c.stats.fragments.Load(),
		Refreshes:       c.stats.refreshes.Load(),
		RefreshFailures: c.stats.refreshFailures.Load(),
	}
	if t := c.tab.Load(); t != nil {
		s.Ready = true
		s.Shards, s.Masters = len(t.shards), len(t.masters)
		for _, o := range t.owner {
			if o >= 0 {
				s.SlotsCovered++
			}
		}
	}
	c.mu.Lock()
	s.Nodes = len(c.nodes)
	s.LastRefresh, s.LastError = c.lastOK, c.lastErr
	c.mu.Unlock()
	return s
}
