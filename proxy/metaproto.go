package proxy

import (
	"slices"
	"sync"

	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/kind"
)

// server_protocol auto: every new socket of a pool whose router probes
// (kind.MetaProber: the sharded kind's memcache pools) asks its server
// "mn" (codec.HandshakeOptions.MetaProbe). A one-key get or
// gets a client sends goes as a meta get (memcache.MetaGet, applied by the
// backend as it writes the request: backend.Config.MetaRewrite) on the
// sockets whose server answered, and as written on the others; the
// sharded kind sets its backends up so (package shard), and tells the
// server through its OnMeta hook (kind.Env.OnMeta), backendMetaChanged. The
// decision is per socket, so a fleet that is being upgraded, or a server
// replaced by an older one at the same address, is served right from its
// next socket on; the pool's summary (what its servers speak) is logged
// when it changes and shown by "stats settings".

// metaLog remembers, per pool name, the summary last logged, so that a
// pool logs what its servers speak once per change, across reloads.
type metaLog struct {
	mu   sync.Mutex
	last map[string]string
}

// backendMetaChanged hears that b's server was found to speak meta or
// text only: first, when b is new, or after the server at its address
// changed. A change of a known server is logged; then the running pools'
// summaries.
func (s *Server) backendMetaChanged(b *backend.Backend, meta, first bool) {
	gen := s.gen.Load()
	if gen == nil {
		return // New logs the first generation's summaries once it is installed
	}
	for _, p := range gen.pools {
		if bs, ok := autoBackends(p); ok && !first && slices.Contains(bs, b) {
			p.log.Info("server protocol changed", "server", b.Name(), "meta", meta)
		}
	}
	s.logMetaSummaries(gen)
}

// logMetaSummaries logs the summary of each auto pool of gen that
// differs from the one last logged for its name. It runs when a server's
// protocol becomes known or changes, and when a generation is installed
// (sockets validated while it was being built, a preconnect, told no
// running pool).
func (s *Server) logMetaSummaries(gen *generation) {
	s.metaLog.mu.Lock()
	defer s.metaLog.mu.Unlock()
	for _, p := range gen.pools {
		bs, ok := autoBackends(p)
		if !ok {
			continue
		}
		uses, meta, text := kind.MetaSummary(bs)
		if uses == "unknown" || s.metaLog.last[p.cfg.Name] == uses {
			continue
		}
		if s.metaLog.last == nil {
			s.metaLog.last = map[string]string{}
		}
		s.metaLog.last[p.cfg.Name] = uses
		p.log.Info("server protocol", "server_protocol", config.ServerProtocolAuto, "uses", uses,
			"servers_meta", meta, "servers_text", text, "servers", len(bs))
	}
}

// autoBackends returns the servers of p whose sockets ask them whether
// they speak meta (server_protocol auto), as its router tells
// (kind.MetaProber), and false for a pool that does not probe.
func autoBackends(p *pool) ([]*backend.Backend, bool) {
	if mp, ok := p.router.(kind.MetaProber); ok {
		return mp.MetaProbed()
	}
	return nil, false
}
