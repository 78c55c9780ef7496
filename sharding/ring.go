package sharding

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Ring is memcached's proxy ring distribution (mcp.dist_ring_hash,
// proxy_ring_hash.c), a ketama-style ring without weights. Each server's
// Name must be "host:port" (split at the last colon); every server gets
// RingPoints points (default 160), placed according to DistOptions.RingMode:
//
//   - "default": point k (k < RingPoints) is the low 32 bits of
//     XXH3("host:port-k", 0).
//   - "ketama": md5("host:port-k") for k < RingPoints/4, 4 little-endian
//     points per digest (libketama).
//   - "twemproxy": as "ketama", but "host-k" when the port is "11211"; equal
//     to twemproxy's ketama only for equal weights and unnamed servers.
//   - "evcache": as "ketama" over "host/host:port-k" (Netflix EVCache).
//
// Points are sorted stably; a hash maps to the first point >= hash, else to
// the first point, which is what libketama's binary search in
// ketama_get_server computes. memcached truncates the 64-bit pool hash to 32
// bits before the lookup, so Ring only has Pick. With the md5 modes the key
// hash is normally mcp.dist_ring_hash.hash, which is this package's "md5";
// a pool that keeps memcached's default hash uses XXH3 ("xxh3").
//
// Two deviations from memcached's C code, both where that code has undefined
// behaviour: in "default" mode memcached never advances its continuum index
// (every point lands in slot 0 and the rest of the ring is uninitialised
// memory), so we implement the evident intent; and in the md5 modes a
// RingPoints that is not a multiple of 4 leaves memcached with unset slots,
// where we place floor(RingPoints/4)*4 points.
type Ring struct {
	ring continuum
}

var _ Distribution = (*Ring)(nil)

// ringLabel appends the string hashed for point group k of host:port.
type ringLabel func(buf []byte, host, port string, k int) []byte

var ringModes = map[string]ringLabel{
	"default": appendHostPort,
	"ketama":  appendHostPort,
	"twemproxy": func(buf []byte, host, port string, k int) []byte {
		if port == "11211" {
			return strconv.AppendInt(append(append(buf, host...), '-'), int64(k), 10)
		}
		return appendHostPort(buf, host, port, k)
	},
	"evcache": func(buf []byte, host, port string, k int) []byte {
		return appendHostPort(append(append(buf, host...), '/'), host, port, k)
	},
}

// appendHostPort appends "host:port-k".
func appendHostPort(buf []byte, host, port string, k int) []byte {
	buf = append(append(append(append(buf, host...), ':'), port...), '-')
	return strconv.AppendInt(buf, int64(k), 10)
}

// NewRing builds a ring over servers with opts.RingMode and opts.RingPoints.
// It fails with ErrBadRingMode for an unknown mode.
func NewRing(servers []Server, opts DistOptions) (*Ring, error) {
	if err := checkServers(servers); err != nil {
		return nil, err
	}
	mode := opts.RingMode
	if mode == "" {
		mode = "default"
	}
	label, ok := ringModes[mode]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrBadRingMode, mode)
	}
	per := opts.RingPoints
	if per <= 0 {
		per = ketamaPointsPerServer
	}
	pts := make([]point, 0, len(servers)*per)
	buf := make([]byte, 0, 64)
	for i, s := range servers {
		host, port := s.Name, ""
		if c := strings.LastIndexByte(s.Name, ':'); c >= 0 {
			host, port = s.Name[:c], s.Name[c+1:]
		}
		if mode == "default" {
			for k := range per {
				buf = label(buf[:0], host, port, k)
				pts = append(pts, point{uint32(XXH3(buf, 0)), int32(i)})
			}
			continue
		}
		for k := range per / 4 {
			d := md5.Sum(label(buf[:0], host, port, k))
			for x := range 4 {
				pts = append(pts, point{binary.LittleEndian.Uint32(d[4*x:]), int32(i)})
			}
		}
	}
	return &Ring{ring: newContinuum(pts)}, nil
}

// Pick returns the server of the first point >= hash, wrapping to the first
// point.
func (r *Ring) Pick(hash uint32) int { return r.ring.pick(hash) }
