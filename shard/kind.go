package shard

import (
	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/memcache"
	"shardproxy/route"
)

// init registers the sharded kind with kind and its rules with config.
func init() {
	kind.Register(config.KindSharded, poolKind{})
	config.RegisterKind(configRules)
}

// poolKind is the sharded kind, twemproxy's: every pool that is neither a
// Redis Cluster nor routed by a route file.
type poolKind struct{}

var _ kind.Kind = poolKind{}

// Build implements kind.Kind (newRouter).
func (poolKind) Build(k *kind.Env) (route.Router, error) { return newRouter(k) }

// Describe implements kind.Kind: the servers, distribution and hash, and
// what the pool adds to them (Sentinels, a near cache).
func (poolKind) Describe(pc *config.Pool, r route.Router) []any {
	attrs := []any{"servers", len(r.Backends()), "distribution", pc.Distribution, "hash", pc.Hash}
	if !pc.Redis {
		attrs = append(attrs, "server_protocol", pc.ServerProtocol)
	}
	if n := len(pc.Sentinels); n > 0 {
		attrs = append(attrs, "sentinels", n)
	}
	if pc.NearCache > 0 {
		attrs = append(attrs, "near_cache_mib", pc.NearCache, "near_cache_ttl", pc.NearCacheTTL,
			"near_cache_fill", pc.NearCacheFill)
	}
	return attrs
}

// Settings implements kind.Kind: how the pool places keys, and what its
// servers speak under server_protocol auto.
func (poolKind) Settings(pc *config.Pool, r route.Router) []codec.Stat {
	return kind.PlacementSettings(pc, r)
}

// autoMeta sets up cfg, a native memcache pool's backend, for
// server_protocol auto: every new socket asks its server "mn"
// (codec.HandshakeOptions.MetaProbe), and a one-key get or gets goes as a
// meta get (memcache.MetaGet, applied by the backend as it writes the
// request) on the sockets whose server answered. onMeta is the server's
// hook (kind.Env.OnMeta), which logs what the pool's servers speak.
func autoMeta(cfg *backend.Config, onMeta func(b *backend.Backend, meta, first bool)) {
	cfg.Handshake.MetaProbe = true
	cfg.MetaRewrite = memcache.MetaGet
	cfg.OnMeta = onMeta
}
