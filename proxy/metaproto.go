package proxy

import (
	"fmt"
	"slices"

	"shardproxy/backend"
	"shardproxy/config"
	"shardproxy/memcache"
)

// server_protocol auto: every new socket of a native memcache pool asks
// its server "mn" (codec.HandshakeOptions.MetaProbe). A one-key get or
// gets a client sends goes as a meta get (memcache.MetaGet, applied by the
// backend as it writes the request: backend.Config.MetaRewrite) on the
// sockets whose server answered, and as written on the others. The
// decision is per socket, so a fleet that is being upgraded, or a server
// replaced by an older one at the same address, is served right from its
// next socket on; the pool's summary (what its servers speak) is logged
// when it changes and shown by "stats settings".

// autoMeta sets up cfg, a native memcache pool's backend, for
// server_protocol auto.
func autoMeta(cfg *backend.Config, srv *Server) {
	cfg.Handshake.MetaProbe = true
	cfg.MetaRewrite = memcache.MetaGet
	cfg.OnMeta = srv.backendMetaChanged
}

// metaSummary says what an auto pool's servers speak, as the newest
// socket of each told: "meta" (every server that told speaks it), "text"
// (none does), "mixed", or "unknown" before any socket is validated;
// and the counts. except, when not nil, is left out.
func metaSummary(bs []*backend.Backend, except *backend.Backend) (uses string, meta, text int) {
	for _, b := range bs {
		if b == except {
			continue
		}
		switch m, known := b.Meta(); {
		case !known:
		case m:
			meta++
		default:
			text++
		}
	}
	return summaryName(meta, text), meta, text
}

// backendMetaChanged logs what changes in the summary of the running
// pool that holds b when b's server is found to speak meta or text only:
// first, when b is new, or after a server at its address changed.
func (s *Server) backendMetaChanged(b *backend.Backend, meta, first bool) {
	gen := s.gen.Load()
	if gen == nil {
		return
	}
	for _, p := range gen.pools {
		r, ok := p.router.(*shardRouter)
		if !ok || p.cfg.ServerProtocol != config.ServerProtocolAuto || !slices.Contains(r.backends, b) {
			continue
		}
		// The summary before this change: b as it was (unknown, or the
		// other protocol), then as it is now.
		_, bm, bt := metaSummary(r.backends, b)
		switch {
		case first:
		case meta:
			bt++
		default:
			bm++
		}
		before := summaryName(bm, bt)
		after, am, at := metaSummary(r.backends, nil)
		if !first {
			p.log.Info("server protocol changed", "server", b.Name(), "meta", meta)
		}
		if after != before {
			p.log.Info("server protocol", "server_protocol", config.ServerProtocolAuto, "uses", after,
				"servers_meta", am, "servers_text", at, "servers", len(r.backends))
		}
	}
}

// summaryName is metaSummary's word for meta and text servers.
func summaryName(meta, text int) string {
	switch {
	case meta > 0 && text > 0:
		return "mixed"
	case meta > 0:
		return "meta"
	case text > 0:
		return "text"
	}
	return "unknown"
}

// metaSetting is the pool's "stats settings" line of what an auto pool's
// servers speak now: "meta 3/3", "mixed 2/3" (servers on meta, of all),
// "text 0/3", "unknown 0/3".
func (p *pool) metaSetting() (string, bool) {
	r, ok := p.router.(*shardRouter)
	if !ok || p.cfg.ServerProtocol != config.ServerProtocolAuto || p.cfg.Redis {
		return "", false
	}
	uses, meta, _ := metaSummary(r.backends, nil)
	return fmt.Sprintf("%s %d/%d", uses, meta, len(r.backends)), true
}
