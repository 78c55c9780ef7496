package sharding

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Server is one member of a pool as a distribution sees it.
type Server struct {
	// Name is the node name. For twemproxy pools it is computed by the
	// caller (config): the explicit name if the servers line has one, else
	// the host alone when the port is 11211, else "host:port"; a unix socket
	// without a name is its path followed by ":". ketama hashes it; Pool
	// sorts servers by it. ring expects "host:port" (memcached proxy
	// backends).
	Name string
	// Weight is the relative share of keys, > 0. ketama and modula use it;
	// random, jump and ring ignore it (as twemproxy and memcached do).
	Weight int
}

// Distribution maps a key hash to a server. Pick returns an index into the
// server slice the distribution was built from. Implementations are
// immutable after construction, safe for concurrent use and do not allocate.
type Distribution interface {
	Pick(hash uint32) int
}

// Distribution64 is a Distribution that can consume a 64-bit key hash (jump,
// as memcached's proxy feeds it XXH3). Pool prefers Pick64 when the
// distribution implements it.
type Distribution64 interface {
	Distribution
	Pick64(hash uint64) int
}

// DistOptions holds the options of the distributions that have any. The zero
// value is valid.
type DistOptions struct {
	// Rand is random's source of randomness. nil means an internal lock-free
	// generator seeded with Seed. A source that is not the internal one is
	// guarded by a mutex, so it need not be goroutine-safe.
	Rand rand.Source
	// Seed seeds random's internal generator; 0 means seeded from the clock
	// (twemproxy calls srandom(time)).
	Seed uint64
	// RingMode selects how ring places points (memcached's omode):
	// "default" (""), "ketama", "twemproxy" or "evcache". See Ring.
	RingMode string
	// RingPoints is ring's number of points per server (memcached's
	// obuckets); 0 means 160.
	RingPoints int
}

// distributions maps each kind to its constructor.
var distributions = map[string]func([]Server, DistOptions) (Distribution, error){
	"ketama": func(s []Server, _ DistOptions) (Distribution, error) { return NewKetama(s) },
	"modula": func(s []Server, _ DistOptions) (Distribution, error) { return NewModula(s) },
	"random": func(s []Server, o DistOptions) (Distribution, error) { return NewRandom(s, o) },
	"jump":   func(s []Server, _ DistOptions) (Distribution, error) { return NewJumpHash(s) },
	"ring":   func(s []Server, o DistOptions) (Distribution, error) { return NewRing(s, o) },
}

// DistributionNames returns the kinds NewDistribution accepts.
func DistributionNames() []string {
	return []string{"ketama", "modula", "random", "jump", "ring"}
}

// NewDistribution builds the distribution kind (one of DistributionNames)
// over servers. It fails with ErrUnknownDistribution for an unknown kind,
// ErrNoServers for an empty server list and ErrBadWeight for a weight <= 0
// or weights that add up to more than MaxTotalWeight.
func NewDistribution(kind string, servers []Server, opts DistOptions) (Distribution, error) {
	build, ok := distributions[kind]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownDistribution, kind)
	}
	return build(servers, opts)
}

// MaxTotalWeight is the most the weights of a distribution's servers may
// add up to: twemproxy sums them in 32 bits (ketama's shares, modula's
// slots), and a sum that wraps would place keys nowhere it intends.
const MaxTotalWeight = math.MaxUint32

// checkServers validates what every distribution needs.
func checkServers(servers []Server) error {
	if len(servers) == 0 {
		return ErrNoServers
	}
	var total uint64
	for _, s := range servers {
		if s.Weight <= 0 {
			return fmt.Errorf("%w: server %q has weight %d", ErrBadWeight, s.Name, s.Weight)
		}
		if total += uint64(s.Weight); total > MaxTotalWeight {
			return fmt.Errorf("%w: the weights add up to more than %d", ErrBadWeight, uint64(MaxTotalWeight))
		}
	}
	return nil
}
