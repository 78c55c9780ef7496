package cluster

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrBadTopology reports a CLUSTER SHARDS or CLUSTER SLOTS reply that
	// cannot be read as a slot map. Parse errors wrap it.
	ErrBadTopology = errors.New("cluster: bad topology reply")
	// ErrNotCluster reports a node that answers CLUSTER SHARDS and CLUSTER
	// SLOTS with an error: not a cluster node (cluster-enabled no), or a
	// node that refuses them.
	ErrNotCluster = errors.New("cluster: not a cluster node")
	// ErrNoSlots reports a slot map in which no slot is served.
	ErrNoSlots = errors.New("cluster: no slot is assigned")
	// ErrClosed reports a request routed after Close.
	ErrClosed = errors.New("cluster: closed")
)

// errorf wraps ErrBadTopology with a description.
func errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadTopology, fmt.Sprintf(format, args...))
}

// RedirectError is a MOVED or ASK reply from a cluster node: the slot is
// (ASK: for this one request) served by Addr.
type RedirectError struct {
	// Ask is true for -ASK (the slot is being migrated: ask Addr once, after
	// ASKING) and false for -MOVED (Addr owns the slot now).
	Ask bool
	// Slot is the slot the node named.
	Slot int
	// Addr is "host:port" of the node to ask. An empty host in the reply
	// (Redis 7 sends ":port" when the node's endpoint is unknown) is
	// replaced by the host of the node that sent the redirect.
	Addr string
}

func (e *RedirectError) Error() string {
	kind := "MOVED"
	if e.Ask {
		kind = "ASK"
	}
	return "cluster: " + kind + " " + strconv.Itoa(e.Slot) + " " + e.Addr
}
