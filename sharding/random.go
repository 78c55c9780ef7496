package sharding

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Random is twemproxy's random distribution (nc_random.c): every key goes to
// random() % n, ignoring its hash and the weights.
type Random struct {
	n   uint64
	src rand.Source // goroutine-safe
}

var _ Distribution = (*Random)(nil)

// NewRandom builds a random distribution over servers drawing from
// opts.Rand, or from an internal generator seeded with opts.Seed (the clock
// when 0).
func NewRandom(servers []Server, opts DistOptions) (*Random, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	return &Random{n: uint64(len(servers)), src: safeSource(opts)}, nil
}

// Pick ignores hash and returns a random server.
func (r *Random) Pick(uint32) int {
	return int(r.src.Uint64() % r.n)
}

// safeSource returns a goroutine-safe source for opts: the internal
// generator, or opts.Rand behind a mutex. Sources it already made are
// returned as they are, so a Pool can share one source across rebuilds.
func safeSource(opts DistOptions) rand.Source {
	switch src := opts.Rand.(type) {
	case nil:
		seed := opts.Seed
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		return newSplitMix(seed)
	case *splitMix, *lockedSource:
		return src
	default:
		return &lockedSource{src: src}
	}
}

// splitMix is SplitMix64 over an atomic counter: lock-free, allocation-free,
// and for one goroutine a deterministic sequence per seed.
type splitMix struct{ state atomic.Uint64 }

func newSplitMix(seed uint64) *splitMix {
	s := &splitMix{}
	s.state.Store(seed)
	return s
}

func (s *splitMix) Uint64() uint64 {
	z := s.state.Add(0x9e3779b97f4a7c15)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// lockedSource makes a caller's source goroutine-safe.
type lockedSource struct {
	mu  sync.Mutex
	src rand.Source
}

func (l *lockedSource) Uint64() uint64 {
	l.mu.Lock()
	v := l.src.Uint64()
	l.mu.Unlock()
	return v
}
