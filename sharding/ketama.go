package sharding

import (
	"crypto/md5"
	"encoding/binary"
	"math"
	"strconv"
)

// ketamaPointsPerServer and ketamaPointsPerHash are twemproxy's
// KETAMA_POINTS_PER_SERVER and KETAMA_POINTS_PER_HASH.
const (
	ketamaPointsPerServer = 160
	ketamaPointsPerHash   = 4
)

// Ketama is twemproxy's consistent-hash continuum (nc_ketama.c), placement
// for placement. Each server gets
//
//	pct    = float32(weight) / float32(totalWeight)
//	points = floor(float32(float64(pct*160/4*float32(n)) + 1e-10)) * 4
//
// computed in float32 as twemproxy does (160 points with equal weights).
// Point group i of a server is md5(name + "-" + i); each digest gives 4
// little-endian uint32 points. Points are sorted (stably, so equal points keep
// server order as glibc's merge-sort qsort does) and a hash maps to the first
// point >= hash, or to the first point when there is none.
type Ketama struct {
	ring continuum
}

var _ Distribution = (*Ketama)(nil)

// NewKetama builds the continuum over servers; twemproxy builds it over the
// live servers of a pool, in the pool's sorted order. Names longer than 266
// bytes cannot match twemproxy, whose point label buffer holds 272 bytes and
// which then hashes past its end.
func NewKetama(servers []Server) (*Ketama, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	var total uint32
	for _, s := range servers {
		total += uint32(s.Weight)
	}
	pts := make([]point, 0, len(servers)*ketamaPointsPerServer)
	buf := make([]byte, 0, 64)
	for i, s := range servers {
		n := ketamaPoints(uint32(s.Weight), total, len(servers))
		for g := range n / ketamaPointsPerHash {
			buf = strconv.AppendUint(append(append(buf[:0], s.Name...), '-'), uint64(g), 10)
			d := md5.Sum(buf)
			for x := range ketamaPointsPerHash {
				pts = append(pts, point{binary.LittleEndian.Uint32(d[4*x:]), int32(i)})
			}
		}
	}
	return &Ketama{ring: newContinuum(pts)}, nil
}

// ketamaPoints is twemproxy's pointer_per_server, in its float32 arithmetic.
func ketamaPoints(weight, total uint32, nlive int) uint32 {
	pct := float32(weight) / float32(total)
	v := float32(float32(pct*ketamaPointsPerServer) / ketamaPointsPerHash)
	v = float32(v * float32(nlive))
	v = float32(float64(v) + 0.0000000001)
	return uint32(float32(math.Floor(float64(v))) * ketamaPointsPerHash)
}

// Pick returns the server of the first point >= hash, wrapping to the first
// point.
func (k *Ketama) Pick(hash uint32) int { return k.ring.pick(hash) }

// Len returns the number of points on the continuum.
func (k *Ketama) Len() int { return len(k.ring.values) }
