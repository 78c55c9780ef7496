package sharding

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
)

// Config describes a pool. The zero value of every field but Servers is
// valid.
type Config struct {
	// Servers are the pool's servers as written in the configuration, in
	// any order; Pool sorts them (see Pool.Servers).
	Servers []Server
	// Hash is the key hash, one of HashNames; "" means "fnv1a_64",
	// twemproxy's default.
	Hash string
	// HashTag is "" or exactly 2 bytes, e.g. "{}" or "$$". When set, only
	// the bytes between the first HashTag[0] and the next HashTag[1] after
	// it are hashed, if there is at least one; otherwise the whole key.
	HashTag string
	// Distribution is one of DistributionNames; "" means "ketama",
	// twemproxy's default.
	Distribution string
	// AutoEject makes Eject and Restore rebuild the distribution over the
	// live servers (twemproxy's auto_eject_hosts). Without it they only
	// record the state and placement never changes.
	AutoEject bool
	// Seed is the XXH3 seed when Hash is "xxh3" (memcached derives it from a
	// pool's seed string as XXH3(seed, 0)) and the seed of random's
	// generator (0 = seeded from the clock).
	Seed uint64
	// KeepOrder keeps Servers in the order given instead of twemproxy's
	// sorted order, for memcached proxy pools, whose jump buckets and ring
	// ids follow the pool's backend list.
	KeepOrder bool
	// Dist passes ring's options (RingMode, RingPoints) and random's source
	// (Rand). Its Seed is ignored in favour of Config.Seed.
	Dist DistOptions
}

// Pool places keys on servers the way a twemproxy server pool does: hash
// tag, key hash, distribution over the live servers.
//
// With AutoEject, an ejection rebuilds the distribution over the remaining
// servers exactly as nutcracker does. Under ketama only the ejected server's
// keys move, plus a few percent more when a recomputed float32 share changes
// a server's point count (unequal weights, or equal weights at n = 25, 47,
// 50, ...); under modula and jump, whose indices shift, most keys move. A rebuild of a 1,000-server ketama ring takes about 10ms.
//
// Pick is safe for concurrent use with itself and with Eject and Restore, and
// does not allocate: it reads an immutable snapshot through an atomic
// pointer, which Eject and Restore replace.
type Pool struct {
	servers   []Server
	hash      HashFunc
	hash64    Hash64Func // used when the distribution is a Distribution64
	tag       [2]byte
	hasTag    bool
	kind      string
	opts      DistOptions
	autoEject bool
	hashless  bool // random ignores the key

	mu   sync.Mutex // serialises Eject and Restore
	live []bool     // guarded by mu
	snap atomic.Pointer[snapshot]
}

// snapshot is the immutable placement state Pick reads.
type snapshot struct {
	dist   Distribution
	dist64 Distribution64 // dist as a Distribution64, or nil
	index  []int          // distribution index -> server index
	live   []bool         // per server, as of this snapshot
}

// New validates cfg and builds a pool with every server live. It fails on an
// unknown hash or distribution, a bad hash tag, an empty server list, a
// weight <= 0 or two servers with the same name.
func New(cfg Config) (*Pool, error) {
	h, h64, err := poolHash(cmp.Or(cfg.Hash, "fnv1a_64"), cfg.Seed)
	if err != nil {
		return nil, err
	}
	kind := cmp.Or(cfg.Distribution, "ketama")
	if _, ok := distributions[kind]; !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownDistribution, kind)
	}
	if len(cfg.HashTag) != 0 && len(cfg.HashTag) != 2 {
		return nil, fmt.Errorf("%w: %q", ErrBadHashTag, cfg.HashTag)
	}
	servers, err := poolServers(cfg.Servers, cfg.KeepOrder)
	if err != nil {
		return nil, err
	}
	opts := cfg.Dist
	opts.Seed = cfg.Seed
	if kind == "random" {
		opts.Rand = safeSource(opts) // one source shared by every rebuild
	}
	p := &Pool{
		servers:   servers,
		hash:      h,
		hash64:    h64,
		hasTag:    cfg.HashTag != "",
		kind:      kind,
		opts:      opts,
		autoEject: cfg.AutoEject,
		hashless:  kind == "random",
		live:      make([]bool, len(servers)),
	}
	if p.hasTag {
		p.tag = [2]byte{cfg.HashTag[0], cfg.HashTag[1]}
	}
	for i := range p.live {
		p.live[i] = true
	}
	s, err := p.build(nil)
	if err != nil {
		return nil, err
	}
	p.snap.Store(s)
	return p, nil
}

// poolHash returns the 32- and 64-bit forms of the named hash, with seed
// applied to xxh3.
func poolHash(name string, seed uint64) (HashFunc, Hash64Func, error) {
	h, ok := LookupHash(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownHash, name)
	}
	h64, _ := LookupHash64(name, seed)
	if name == "xxh3" {
		h = func(key []byte) uint32 { return uint32(h64(key)) }
	}
	return h, h64, nil
}

// poolServers validates servers and returns them in pool order.
func poolServers(servers []Server, keepOrder bool) ([]Server, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(servers))
	for _, s := range servers {
		if seen[s.Name] {
			return nil, fmt.Errorf("%w %q", ErrDuplicateName, s.Name)
		}
		seen[s.Name] = true
	}
	if keepOrder {
		return slices.Clone(servers), nil
	}
	return SortServers(servers), nil
}

// SortServers returns a sorted copy of servers in twemproxy's order: shorter
// names first, then bytewise (so "server9" comes before "server10"). Pool
// indices refer to this order.
func SortServers(servers []Server) []Server {
	sorted := slices.Clone(servers)
	slices.SortFunc(sorted, func(a, b Server) int {
		if c := cmp.Compare(len(a.Name), len(b.Name)); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return sorted
}

// build makes a snapshot from p.live. With AutoEject the distribution covers
// only live servers; without it, all of them, and prev's distribution is
// reused. Callers hold p.mu (or own p).
func (p *Pool) build(prev *snapshot) (*snapshot, error) {
	s := &snapshot{live: slices.Clone(p.live)}
	if prev != nil && !p.autoEject {
		s.dist, s.dist64, s.index = prev.dist, prev.dist64, prev.index
		return s, nil
	}
	members := make([]Server, 0, len(p.servers))
	for i, srv := range p.servers {
		if p.live[i] || !p.autoEject {
			members = append(members, srv)
			s.index = append(s.index, i)
		}
	}
	if len(members) == 0 {
		return s, nil
	}
	d, err := NewDistribution(p.kind, members, p.opts)
	if err != nil {
		return nil, err
	}
	s.dist = d
	if d64, ok := d.(Distribution64); ok {
		s.dist64 = d64
	}
	return s, nil
}

// Servers returns the pool's servers in twemproxy's sorted order (or as
// given, with Config.KeepOrder). Pick, Eject, Restore and Live use indices
// into this slice. The slice is shared: do not modify it.
func (p *Pool) Servers() []Server { return p.servers }

// Pick returns the index into Servers of the server for key. It applies the
// hash tag, hashes (an empty key hashes to 0; a single-server pool skips
// hashing) and asks the distribution. It returns ErrNoServers when AutoEject
// is on and every server is ejected.
func (p *Pool) Pick(key []byte) (int, error) {
	s := p.snap.Load()
	if s.dist == nil {
		return 0, ErrNoServers
	}
	if len(p.servers) == 1 {
		return 0, nil
	}
	key = p.hashKey(key)
	if s.dist64 != nil {
		var h uint64
		if len(key) > 0 {
			h = p.hash64(key)
		}
		return s.index[s.dist64.Pick64(h)], nil
	}
	var h uint32
	if len(key) > 0 && !p.hashless {
		h = p.hash(key)
	}
	return s.index[s.dist.Pick(h)], nil
}

// hashKey applies the hash tag rule: the bytes strictly between the first
// tag[0] and the first tag[1] after it, when there is at least one such
// byte; otherwise the whole key.
func (p *Pool) hashKey(key []byte) []byte {
	if !p.hasTag {
		return key
	}
	start := bytes.IndexByte(key, p.tag[0])
	if start < 0 {
		return key
	}
	end := bytes.IndexByte(key[start+1:], p.tag[1])
	if end <= 0 { // not found, or nothing between the tags
		return key
	}
	return key[start+1 : start+1+end]
}

// Eject marks server i (an index into Servers) as ejected. With AutoEject the
// distribution is rebuilt over the remaining live servers, as twemproxy does
// when a server reaches server_failure_limit; without it placement does not
// change. Failure counting and the retry timer belong to the caller. Ejecting
// an ejected server, or an index out of range, does nothing.
func (p *Pool) Eject(i int) { p.setLive(i, false) }

// Restore marks server i live again and, with AutoEject, rebuilds the
// distribution; restoring every server gives back the original placement.
func (p *Pool) Restore(i int) { p.setLive(i, true) }

// SetLive makes live, one entry per server in Servers order, the live set
// in one rebuild: a set of ejections decided elsewhere (a fleet's ring) is
// applied at once, and Pick never sees a set between the old one and the
// new. The placement is the one Eject and Restore reach for the same set.
// A set equal to the current one does nothing. It panics if len(live) is
// not len(Servers()).
func (p *Pool) SetLive(live []bool) {
	if len(live) != len(p.servers) {
		panic(fmt.Sprintf("sharding: SetLive of %d servers in a pool of %d", len(live), len(p.servers)))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(p.live, live) {
		return
	}
	copy(p.live, live)
	p.rebuild()
}

func (p *Pool) setLive(i int, live bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < 0 || i >= len(p.live) || p.live[i] == live {
		return
	}
	p.live[i] = live
	p.rebuild()
}

// rebuild stores the snapshot of p.live. Callers hold p.mu.
func (p *Pool) rebuild() {
	s, err := p.build(p.snap.Load())
	if err != nil {
		// Unreachable: New built the same distribution over a superset.
		panic(fmt.Sprintf("sharding: rebuild failed: %v", err))
	}
	p.snap.Store(s)
}

// Live reports, per server in Servers order, whether it is live (not
// ejected). The slice is shared with the current snapshot: do not modify it.
func (p *Pool) Live() []bool { return p.snap.Load().live }

// NumLive returns the number of live servers.
func (p *Pool) NumLive() int {
	n := 0
	for _, l := range p.snap.Load().live {
		if l {
			n++
		}
	}
	return n
}
