package admin

import (
	"shardproxy/proxy"
)

// Source is what the admin servers read: a *proxy.Server. Both methods must
// be safe for concurrent use.
type Source interface {
	Stats() proxy.Stats
	Info() proxy.Info
}

var _ Source = (*proxy.Server)(nil)

// Backend states as /backends and the stats port show them.
const (
	stateUp      = "up"      // serving, no recent failure
	stateFailing = "failing" // consecutive failures below the eject limit
	stateBad     = "bad"     // marked bad: fails fast until RetryAt
	// stateProbing is bad past its retry time: it fails fast until a
	// health probe succeeds (the next one at RetryAt).
	stateProbing = "probing"
	// stateEjected is bad in a pool that takes bad servers out of its
	// distribution (auto_eject_hosts, eject_policy remap); the status page
	// shows it.
	stateEjected = "ejected"
)

// state names a server's health.
func state(s proxy.ServerStats) string {
	switch {
	case s.State.Probing:
		return stateProbing
	case s.State.Bad:
		return stateBad
	case s.State.Failures > 0:
		return stateFailing
	}
	return stateUp
}

// stateCode is state as the stats port's integer "state" field.
func stateCode(s proxy.ServerStats) int64 {
	switch state(s) {
	case stateBad, stateProbing:
		return 2
	case stateFailing:
		return 1
	}
	return 0
}

// countKind is one counter of a breakdown by kind.
type countKind struct {
	Kind  string
	Value int64
}

// backendErrors are a backend's failures by kind, as /metrics labels them
// (shardproxy_backend_errors_total) and the status page shows them.
func backendErrors(s proxy.ServerStats) [3]countKind {
	return [3]countKind{{"error", s.ServerErr}, {"timeout", s.ServerTimedout}, {"eof", s.ServerEOF}}
}

// poolErrors are a pool's errors by kind, as /metrics labels them
// (shardproxy_pool_errors_total) and the status page shows them.
func poolErrors(p proxy.PoolStats) [3]countKind {
	return [3]countKind{{"client", p.ClientErr}, {"forward", p.ForwardError}, {"protocol", p.ProtocolErrors}}
}
