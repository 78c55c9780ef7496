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
)

// state names a server's health.
func state(s proxy.ServerStats) string {
	switch {
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
	case stateBad:
		return 2
	case stateFailing:
		return 1
	}
	return 0
}
