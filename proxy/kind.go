package proxy

import (
	"crypto/tls"
	"fmt"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/route"
)

// poolKind is one way of answering a pool's requests: each kind builds its
// own router from the pool's configuration, in its own file, and says what
// the "pool listening" line shows of it. config decides which kind a pool
// is (config.Pool.Kind) and validates each kind's keys; adding a kind is a
// config.Kind and a row here.
type poolKind struct {
	// build makes the pool's router.
	build func(k *kindEnv) (route.Router, error)
	// describe returns what the "pool listening" line says of the pool,
	// as slog attributes.
	describe func(p *pool) []any
}

// poolKinds are the kinds by config.Kind.
var poolKinds = map[config.Kind]*poolKind{
	config.KindSharded: {build: newShardRouter, describe: describeShard},
	config.KindCluster: {build: newClusterRouter, describe: describeCluster},
	config.KindLua:     {build: newLuaRouter, describe: describeLua},
}

// kindOf returns pc's kind.
func kindOf(pc *config.Pool) (*poolKind, error) {
	k, ok := poolKinds[pc.Kind()]
	if !ok {
		return nil, fmt.Errorf("proxy: pool %q: kind %q is not supported by this build", pc.Name, pc.Kind())
	}
	return k, nil
}

// kindEnv is what a kind's build is given.
type kindEnv struct {
	b       *builder
	p       *pool          // the pool being built: its configuration, dialect, limits (build may adjust them), stats, logger
	old     route.Router   // the running router of the pool's name and kind, or nil
	lease   *backend.Lease // where the router's backends come from
	dialTLS *tls.Config    // how backend sockets dial; nil: plain
}

// backendConfig is the template of the pool's backends at addr: the
// pool's timeouts, limits, handshake and TLS.
func (k *kindEnv) backendConfig(addr string) backend.Config {
	pc := k.p.cfg
	return backend.Config{
		Addr:    addr,
		Dialect: k.p.dialect,
		Handshake: codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB,
			Meta: k.p.limits.MetaGets},
		TLS:            k.dialTLS,
		Conns:          pc.ServerConnections,
		ConnectTimeout: pc.ConnectTimeout,
		Timeout:        pc.Timeout,
		FailureLimit:   pc.ServerFailureLimit,
		RetryTimeout:   pc.ServerRetryTimeout,
		HealthInterval: pc.HealthCheckInterval,
		HealthTimeout:  pc.HealthCheckTimeout,
		TCPKeepalive:   pc.TCPKeepalive,
		Preconnect:     pc.Preconnect && !k.b.check,
		Logger:         k.p.log,
	}
}

// watch asks to hear of every backend state change while the pool's
// generation runs.
func (k *kindEnv) watch(f func(b *backend.Backend, bad bool)) {
	k.b.watchers = append(k.b.watchers, f)
}

// link runs f once every pool of the generation is built, with the pools
// by name (eject_policy failover names another pool).
func (k *kindEnv) link(f func(pools map[string]*pool)) {
	k.b.links = append(k.b.links, f)
}

func describeShard(p *pool) []any {
	attrs := []any{"servers", len(p.router.Backends()), "distribution", p.cfg.Distribution, "hash", p.cfg.Hash}
	if !p.cfg.Redis {
		attrs = append(attrs, "server_protocol", p.cfg.ServerProtocol)
	}
	if n := len(p.cfg.Sentinels); n > 0 {
		attrs = append(attrs, "sentinels", n)
	}
	if p.cfg.NearCache > 0 {
		attrs = append(attrs, "near_cache_mib", p.cfg.NearCache, "near_cache_ttl", p.cfg.NearCacheTTL,
			"near_cache_fill", p.cfg.NearCacheFill)
	}
	return attrs
}

func describeLua(p *pool) []any { return []any{"lua", p.cfg.Lua} }

func describeCluster(p *pool) []any { return []any{"cluster_seeds", len(p.cfg.Servers)} }
