package config

import (
	"fmt"
	"slices"
	"sync"
)

// Kind names what a pool is, and so what answers its requests.
type Kind string

// The kinds of pool.
const (
	// KindSharded is twemproxy's pool: keys sharded over servers. It is
	// the kind of every pool no other kind claims.
	KindSharded Kind = "sharded"
	// KindCluster is a Redis Cluster (redis_cluster: true).
	KindCluster Kind = "redis_cluster"
	// KindLua is routed by a route file (lua: file).
	KindLua Kind = "lua"
	// KindRoute combines other pools (route: ...).
	KindRoute Kind = "route"
)

// KindRules are a pool kind's rules over the keys config reads: which
// pools are of the kind, what the kind requires of their keys and what it
// refuses (the keys of the other kinds among them), and the defaults only
// it fills. The keys themselves, how each value is read into a Pool and
// written back, are config's (one pool mapping is one namespace); a kind's
// rules only judge what was read.
//
// The package of a kind registers its rules with RegisterKind from the
// init that registers the kind with package kind: the shard, cluster and
// lua packages. A program that parses configurations links the kinds it
// accepts (proxy/kinds.go links them all); Parse refuses a pool whose
// kind no linked package registered.
type KindRules struct {
	// Kind is the name of the kind.
	Kind Kind
	// Claims reports whether a pool is of the kind, from its fields and
	// IsSet. Pool.Kind asks the kinds that claim in ascending Order. nil
	// makes the kind the default, the kind of a pool no other kind
	// claims: the sharded kind, twemproxy's; one kind at most is the
	// default.
	Claims func(p *Pool) bool
	// Order places Claims among the other kinds': a pool two kinds claim
	// is of the one with the lower Order (a redis_cluster pool with a lua
	// key is a cluster pool, which refuses the key).
	Order int
	// Validate checks the pool's keys by the kind's rules. It runs after
	// the rules every pool follows (listen, servers, the Redis keys,
	// ejection) and before those of the TLS and ACL keys; its errors go
	// in that order, each at the line of the key it is about.
	Validate func(c *PoolCheck)
	// Provision fills the defaults only the kind has, or that depend on
	// the kind, after the defaults every pool has; it may read IsSet.
	// nil: the kind has none.
	Provision func(p *Pool)
}

// The order of the kinds that claim, lowest first (KindRules.Order).
const (
	// OrderRoute is the route kind's: a pool with a route key has no
	// servers of its own, whatever else it says.
	OrderRoute = 5
	// OrderCluster is the redis_cluster kind's: redis_cluster: true
	// decides whatever else the pool has.
	OrderCluster = 10
	// OrderLua is the Lua kind's: a lua key, in a pool that is no
	// cluster.
	OrderLua = 20
)

// kinds are the rules of the kinds linked into the program.
var kinds = new(kindRegistry)

// kindRegistry holds the registered KindRules.
type kindRegistry struct {
	mu       sync.RWMutex
	claiming []KindRules // the kinds with Claims, in Order
	byKind   map[Kind]KindRules
	fallback Kind // the kind registered without Claims, or ""
}

// RegisterKind adds the rules of a kind. A kind's package calls it from
// init; it panics when the kind is registered twice, when two kinds have
// no Claims or the same Order, or when Validate is nil.
func RegisterKind(r KindRules) {
	kinds.register(r)
}

func (g *kindRegistry) register(r KindRules) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, dup := g.byKind[r.Kind]; dup {
		panic("config: kind registered twice: " + string(r.Kind))
	}
	if r.Validate == nil {
		panic("config: kind " + string(r.Kind) + " has no Validate")
	}
	if r.Claims == nil {
		if g.fallback != "" {
			panic(fmt.Sprintf("config: kinds %s and %s both claim every pool", g.fallback, r.Kind))
		}
		g.fallback = r.Kind
	} else {
		for _, o := range g.claiming {
			if o.Order == r.Order {
				panic(fmt.Sprintf("config: kinds %s and %s have the same Order %d", o.Kind, r.Kind, r.Order))
			}
		}
		g.claiming = append(g.claiming, r)
		slices.SortFunc(g.claiming, func(a, b KindRules) int { return a.Order - b.Order })
	}
	if g.byKind == nil {
		g.byKind = make(map[Kind]KindRules)
	}
	g.byKind[r.Kind] = r
}

// of returns the kind of p: the first kind in Order that claims it, else
// the default kind, else KindSharded.
func (g *kindRegistry) of(p *Pool) Kind {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for _, r := range g.claiming {
		if r.Claims(p) {
			return r.Kind
		}
	}
	if g.fallback != "" {
		return g.fallback
	}
	return KindSharded
}

// rules returns the rules registered for k.
func (g *kindRegistry) rules(k Kind) (KindRules, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	r, ok := g.byKind[k]
	return r, ok
}

// Kind returns the pool's kind: the first of the linked kinds that claims
// it, in their Order (a redis_cluster pool, even with a lua key, which it
// refuses; then a Lua pool, a lua key), else the default kind, the
// sharded one (KindSharded also when no linked package registered it).
func (p *Pool) Kind() Kind {
	return kinds.of(p)
}
