package kind

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/route"
)

// Kind is one way of answering a pool's requests: it builds the pool's
// router from the pool's configuration and says what the "pool
// listening" line shows of it. Which kind a pool is (config.Pool.Kind)
// and what its keys must be are the kind's config rules
// (config.KindRules), which its package registers with config from the
// same init as the Kind.
type Kind interface {
	// Build makes the router of the pool env describes. It may adjust
	// env.Limits (what the pool's clients may send) before it returns.
	Build(env *Env) (route.Router, error)
	// Describe returns what the "pool listening" line says of pc, whose
	// router is r, as slog attributes.
	Describe(pc *config.Pool, r route.Router) []any
	// Settings returns the lines of memcached's "stats settings" that
	// say how the kind places pc's keys, between the proxy's "kind" line
	// and the timeouts every pool has.
	Settings(pc *config.Pool, r route.Router) []codec.Stat
}

var (
	registryMu sync.RWMutex
	registry   = map[config.Kind]Kind{}
)

// Register makes k the kind of the pools config calls name. Kind packages
// call it from init; it panics if name is registered twice.
func Register(name config.Kind, k Kind) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("kind: kind registered twice: " + string(name))
	}
	registry[name] = k
}

// Lookup returns the kind registered under name.
func Lookup(name config.Kind) (Kind, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	k, ok := registry[name]
	return k, ok
}

// Env is what a kind's Build is given: the pool being built, what it may
// reuse of the running one, and the server's hooks. The proxy fills every
// field; a test may leave the hooks it does not exercise nil.
type Env struct {
	Pool    *config.Pool   // the pool's configuration
	Source  *config.Config // the configuration it comes from (Source.Path resolves its files)
	Dialect codec.Dialect  // the pool's protocol
	// Limits is what the pool's clients may send and how their requests
	// are parsed; Build may adjust it (a kind that merges INFO sets
	// ServerInfo).
	Limits *codec.Options
	Log    *slog.Logger // the pool's: its records carry the pool's name
	// Old is the running router of the pool's name and kind, or nil: a
	// build carries state over a reload from it (a ketama ring, a slot
	// map, a cache).
	Old     route.Router
	Lease   *backend.Lease // where the router's backends come from
	DialTLS *tls.Config    // how backend sockets dial; nil: plain
	// Check is set when the build only checks the configuration
	// (shardproxy -t): build everything, dial nothing, start no
	// goroutine that outlives Close.
	Check bool
	// Counters keeps the router's counters whole across reloads: add
	// each object that counts when it is made, retire it when it closes.
	Counters *Counters
	// Fragments and ForwardErrors are the pool's counters of the parts
	// of split requests and of requests the router answered with an
	// error of its own.
	Fragments, ForwardErrors *atomic.Int64

	// OnStateChange is the server's backend-state callback: BackendConfig
	// sets it as the backend's backend.Config.OnStateChange, so that the
	// functions given to Watch hear of the backend.
	OnStateChange func(b *backend.Backend, bad bool)
	// OnMeta is the server's hook for server_protocol auto
	// (backend.Config.OnMeta): it logs what the pool's servers speak.
	OnMeta func(b *backend.Backend, meta, first bool)
	// Hot reports whether a key is among the pool's hot keys now
	// (hot_keys; false for every key without it): a near cache with
	// near_cache_hot keeps only those.
	Hot func(key []byte) bool
	// Watch asks to hear of every backend state change while the pool's
	// generation runs.
	Watch func(f func(b *backend.Backend, bad bool))
	// Sections are the pool's "stats NAME" sections (stats settings,
	// stats proxy, ...), for a router that shows them to its code
	// (mcp.server_stats); nil: none.
	Sections codec.SectionEnv
	// Link runs f once every pool of the generation is built, with their
	// routers by pool name (eject_policy failover names another pool).
	Link func(f func(routers map[string]route.Router))
	// FleetRing makes a ring pool's distribution follow its fleet's ring
	// (Ring, then RingFollower.SetRing) instead of its backends' health: a
	// bad backend still fails its requests fast, but only the fleet ejects
	// and restores servers.
	FleetRing bool
	// Ring is the ring the fleet last gave the pool's name, which the new
	// router starts with under FleetRing; zero before any.
	Ring Ring
	// ScheduleReload asks for the configuration to be reloaded, as SIGHUP
	// does (a route file's mcp.schedule_config_reload); it does not block
	// and nil means nobody listens.
	ScheduleReload func()
}

// BackendConfig is the template of the pool's backends at addr: the
// pool's timeouts, limits, handshake and TLS, and the server's
// OnStateChange.
func (e *Env) BackendConfig(addr string) backend.Config {
	pc := e.Pool
	return backend.Config{
		Addr:    addr,
		Dialect: e.Dialect,
		Handshake: codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB,
			Meta: e.Limits.MetaGets},
		TLS:            e.DialTLS,
		Conns:          pc.ServerConnections,
		ConnectTimeout: pc.ConnectTimeout,
		Timeout:        pc.Timeout,
		FailureLimit:   pc.ServerFailureLimit,
		RetryTimeout:   pc.ServerRetryTimeout,
		HealthInterval: pc.HealthCheckInterval,
		HealthTimeout:  pc.HealthCheckTimeout,
		TCPKeepalive:   pc.TCPKeepalive,
		Preconnect:     pc.Preconnect && !e.Check,
		Logger:         e.Log,
		OnStateChange:  e.OnStateChange,
	}
}

// Checked stands in for a router that a configuration check validates
// without building, because building it starts work in the background (a
// Redis Cluster pool reads its slot map at once).
type Checked struct{}

var _ route.Router = Checked{}

// Route implements route.Router; a checked generation never serves, so
// nothing reaches it.
func (Checked) Route(x *route.Exchange)      { panic("kind: a checked router routes nothing") }
func (Checked) Stats() []route.Stat          { return nil }
func (Checked) Backends() []*backend.Backend { return nil }
func (Checked) Close()                       {}

// MetaProber is a router whose memcache servers are asked, socket by
// socket, whether they speak the meta protocol (server_protocol auto: the
// sharded kind's memcache pools). The proxy logs and shows in "stats
// settings" what they speak; a router that is not one has nothing there.
type MetaProber interface {
	// MetaProbed returns the probed servers in the pool's order, and
	// false when the pool does not probe them.
	MetaProbed() ([]*backend.Backend, bool)
}

// MetaSummary says what the probed servers bs speak, as the newest socket
// of each told: "meta" (every server that told speaks it), "text" (none
// does), "mixed", or "unknown" before any socket is validated; and the
// counts.
func MetaSummary(bs []*backend.Backend) (uses string, meta, text int) {
	for _, b := range bs {
		switch m, known := b.Meta(); {
		case !known:
		case m:
			meta++
		default:
			text++
		}
	}
	switch {
	case meta > 0 && text > 0:
		uses = "mixed"
	case meta > 0:
		uses = "meta"
	case text > 0:
		uses = "text"
	default:
		uses = "unknown"
	}
	return uses, meta, text
}

// PlacementSettings are the "stats settings" lines of a pool whose keys
// are placed by hash (the sharded and the cluster kinds): its hash,
// distribution, server_protocol, what its probed servers speak (a
// MetaProber's: "meta 3/3", "mixed 2/3", servers on meta of all), and its
// number of servers.
func PlacementSettings(pc *config.Pool, r route.Router) []codec.Stat {
	st := []codec.Stat{
		{Name: "hash", Value: pc.Hash},
		{Name: "distribution", Value: pc.Distribution},
		{Name: "server_protocol", Value: pc.ServerProtocol},
	}
	if mp, ok := r.(MetaProber); ok {
		if bs, ok := mp.MetaProbed(); ok {
			uses, meta, _ := MetaSummary(bs)
			st = append(st, codec.Stat{Name: "server_protocol_uses", Value: fmt.Sprintf("%s %d/%d", uses, meta, len(bs))})
		}
	}
	return append(st, codec.Stat{Name: "servers", Value: strconv.Itoa(len(pc.Servers))})
}
