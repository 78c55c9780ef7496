package combine

import (
	"fmt"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/route"
)

// init registers the route kind with kind and its rules with config.
func init() {
	kind.Register(config.KindRoute, poolKind{})
	config.RegisterKind(configRules)
}

// configRules are the route kind's rules (config.KindRules): a pool with
// a route key, which has no servers of its own.
var configRules = config.KindRules{
	Kind:      config.KindRoute,
	Claims:    func(p *config.Pool) bool { return p.Route != nil || p.IsSet("route") },
	Order:     config.OrderRoute,
	Validate:  validateConfig,
	Provision: provisionConfig,
}

// validateConfig refuses the keys that say where servers are or how keys
// are placed on them: a route pool's pools say that.
func validateConfig(c *config.PoolCheck) {
	const why = "a route pool has no servers of its own; the pools its route names have"
	c.Refuse([]string{"servers", "servers_from", "sentinels", "replicas", "failover_pool"}, "", why)
	c.RefuseLuaKeys()
	c.RefuseClusterKeys()
	c.RefuseNearKeys("is only valid for a native memcache pool (servers); put it on the pools the route names")
	c.RefuseReplicaKeys()
	c.RefuseSentinelKeys()
	c.RefuseMetaOnRedis()
}

// provisionConfig: requests are parsed as the client sent them; the
// pools the route names write them in their own server_protocol.
func provisionConfig(p *config.Pool) {
	if !p.IsSet("server_protocol") {
		p.ServerProtocol = config.ServerProtocolText
	}
}

// poolKind builds route pools.
type poolKind struct{}

var _ kind.Kind = poolKind{}

// Build implements kind.Kind: the router is put together once every pool
// of the generation is built (Env.Link), from the routers of the pools
// the route names.
func (poolKind) Build(k *kind.Env) (route.Router, error) {
	t := &top{rc: k.Counters}
	old, _ := k.Old.(*top)
	env := &envLite{d: k.Dialect, redis: k.Pool.Redis, limits: *k.Limits, check: k.Check}
	rc := k.Pool.Route
	k.Link(func(routers map[string]route.Router) {
		t.link(rc, routers, env, old)
	})
	return t, nil
}

// Describe implements kind.Kind.
func (poolKind) Describe(pc *config.Pool, _ route.Router) []any {
	return []any{"route", describe(pc.Route)}
}

// Settings implements kind.Kind.
func (poolKind) Settings(pc *config.Pool, _ route.Router) []codec.Stat {
	return []codec.Stat{{Name: "route", Value: describe(pc.Route)}}
}

// describe says what a route does, in a few words.
func describe(r *config.Route) string {
	var s string
	switch {
	case r.Migrate != nil:
		s = fmt.Sprintf("migrate %s->%s %s", r.Migrate.From, r.Migrate.To, r.Migrate.Phase)
		for _, a := range r.Migrate.At {
			s += fmt.Sprintf(", %s at %s", a.Phase, a.At.Format(time.RFC3339))
		}
	case r.WarmUp != nil:
		s = fmt.Sprintf("warm_up cold %s warm %s", r.WarmUp.Cold, r.WarmUp.Warm)
	default:
		s = "pool " + r.Pool
	}
	if r.Failover != nil {
		s += fmt.Sprintf(" failover %s on %s", r.Failover.Pool, r.Failover.On)
	}
	if r.Shadow != nil {
		s += fmt.Sprintf(" shadow %s %s %g", r.Shadow.Pool, r.Shadow.Requests, r.Shadow.Fraction)
	}
	return s
}

// envLite is what a route's parts keep of the build's kind.Env.
type envLite struct {
	d      codec.Dialect
	redis  bool
	limits codec.Options
	check  bool // a configuration check: no timers
}

// top is a route pool's router: the parts its route names, put together
// by link.
type top struct {
	r       route.Router
	mig     *migrate // the migration or warm-up, if any: a reload keeps its guard
	rc      *kind.Counters
	sources []kind.CounterSource
}

var _ route.Router = (*top)(nil)

// link builds the route's parts over the routers of the generation.
func (t *top) link(rc *config.Route, routers map[string]route.Router, env *envLite, old *top) {
	pool := func(name string) route.Router { return borrowed{routers[name]} }
	var oldMig *migrate
	if old != nil {
		oldMig = old.mig
	}
	switch {
	case rc.Migrate != nil:
		t.mig = newMigrate("migrate", routers[rc.Migrate.From], routers[rc.Migrate.To], rc.Migrate.From, rc.Migrate.To,
			plans[rc.Migrate.Phase], env, oldMig)
		t.mig.follow(rc.Migrate, env.check)
		t.r = t.count(t.mig)
	case rc.WarmUp != nil:
		t.mig = newMigrate("warm_up", routers[rc.WarmUp.Warm], routers[rc.WarmUp.Cold], rc.WarmUp.Warm, rc.WarmUp.Cold,
			warmUpPlan, env, oldMig)
		t.r = t.count(t.mig)
	default:
		t.r = pool(rc.Pool)
	}
	if rc.Failover != nil {
		t.r = t.count(newFailover(t.r, pool(rc.Failover.Pool), rc.Failover, env.d, env.redis))
	}
	if rc.Shadow != nil {
		t.r = t.count(newShadow(t.r, pool(rc.Shadow.Pool), rc.Shadow, env.redis))
	}
}

// count has the pool's counters count r, and returns it.
func (t *top) count(r interface {
	route.Router
	kind.CounterSource
}) route.Router {
	t.rc.Add(r)
	t.sources = append(t.sources, r)
	return r
}

// Route implements route.Router.
func (t *top) Route(x *route.Exchange) { t.r.Route(x) }

// Stats implements route.Router: every part's counters, kept whole
// across reloads.
func (t *top) Stats() []route.Stat { return t.rc.Apply(t.r.Stats()) }

// Backends implements route.Router: none of its own.
func (t *top) Backends() []*backend.Backend { return nil }

// Close implements route.Router: the parts' counts are kept; the pools
// the route names close with their own pools.
func (t *top) Close() {
	for _, s := range t.sources {
		t.rc.Retire(s)
	}
	if t.r != nil {
		t.r.Close()
	}
}

// borrowed is a pool's router as a route uses it: its stats and backends
// are the pool's to show and it is the pool's to close.
type borrowed struct{ route.Router }

func (borrowed) Stats() []route.Stat          { return nil }
func (borrowed) Backends() []*backend.Backend { return nil }
func (borrowed) Close()                       {}
