package sharding

// Jump is the jump consistent hash of Lamping and Veach ("A Fast, Minimal
// Memory, Consistent Hash Algorithm", 2014): it maps key to a bucket in
// [0, buckets), moving only 1/buckets of the keys when a bucket is added.
// memcached's proxy (mcp.dist_jump_hash, its default distribution) applies it
// to the 64-bit XXH3 of the key. Jump returns 0 when buckets <= 0.
func Jump(key uint64, buckets int) int {
	var b, j int64 = 0, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64(key>>33+1)))
	}
	return int(b)
}

// JumpHash is the jump distribution (memcached proxy's dist_jump_hash). It
// ignores names and weights. Pick64 takes the full 64-bit key hash; Pick
// zero-extends a 32-bit one.
type JumpHash struct {
	n int
}

var _ Distribution64 = (*JumpHash)(nil)

// NewJumpHash builds a jump distribution over len(servers) buckets.
func NewJumpHash(servers []Server) (*JumpHash, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	return &JumpHash{n: len(servers)}, nil
}

// Pick returns Jump(uint64(hash), n).
func (j *JumpHash) Pick(hash uint32) int { return Jump(uint64(hash), j.n) }

// Pick64 returns Jump(hash, n).
func (j *JumpHash) Pick64(hash uint64) int { return Jump(hash, j.n) }
