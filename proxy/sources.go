package proxy

// SourceStats returns the counters of where a pool's servers come from
// (a servers_from pool's DNS figures), by pool name; nil or an empty
// slice for a pool that has none. It must be safe for concurrent use and
// quick: every stats read calls it once per pool.
type SourceStats func(pool string) []RouterStat

// SetSourceStats installs fn, which the command hands in (the proxy knows
// nothing of where a configuration's servers came from): its counters
// reach PoolStats.Source, and from there the memcached stats command,
// /metrics and the status page. nil removes it. Safe for concurrent use.
func (s *Server) SetSourceStats(fn SourceStats) {
	if fn == nil {
		s.sources.Store(nil)
		return
	}
	s.sources.Store(&fn)
}

// sourceStats returns the source counters of the pool called name.
func (s *Server) sourceStats(name string) []RouterStat {
	if fn := s.sources.Load(); fn != nil {
		return (*fn)(name)
	}
	return nil
}
