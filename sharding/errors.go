package sharding

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with
// details; match them with errors.Is.
var (
	// ErrNoServers is returned by Pool.Pick when every server of the pool is
	// ejected (twemproxy answers such requests with ECONNREFUSED), and by the
	// constructors when given an empty server list.
	ErrNoServers = errors.New("sharding: all servers ejected")

	// ErrUnknownHash means a hash function name is not one of HashNames.
	ErrUnknownHash = errors.New("sharding: unknown hash")

	// ErrUnknownDistribution means a distribution name is not one of
	// DistributionNames.
	ErrUnknownDistribution = errors.New("sharding: unknown distribution")

	// ErrBadHashTag means a hash tag is neither empty nor exactly 2 bytes.
	ErrBadHashTag = errors.New("sharding: hash tag must be exactly 2 bytes")

	// ErrBadWeight means a server weight is zero or negative.
	ErrBadWeight = errors.New("sharding: server weight must be positive")

	// ErrDuplicateName means two servers of one pool share a node name.
	ErrDuplicateName = errors.New("sharding: servers with same name")

	// ErrBadRingMode means DistOptions.RingMode is not a known ring mode.
	ErrBadRingMode = errors.New("sharding: bad ring mode")
)
