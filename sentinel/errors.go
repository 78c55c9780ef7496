package sentinel

import (
	"errors"
	"fmt"
)

var (
	// ErrNoMaster is returned for a master no Sentinel knows (they answer
	// get-master-addr-by-name with a null reply).
	ErrNoMaster = errors.New("sentinel: no sentinel knows the master")
	// ErrNotMaster is returned when the server a Sentinel named does not
	// say "master" to ROLE: a replica, a Sentinel, or a lie.
	ErrNotMaster = errors.New("sentinel: server is not a master")
	// ErrNotReplica is returned by Prober.CheckReplica for a server whose
	// ROLE is not "slave".
	ErrNotReplica = errors.New("sentinel: server is not a replica")
	// ErrLinkDown is returned by Prober.CheckReplica for a replica whose
	// link to its master is not up (ROLE's state is not "connected").
	ErrLinkDown = errors.New("sentinel: replica's link to its master is down")
	// ErrClosed is returned by a Monitor's or Prober's methods after Close.
	ErrClosed = errors.New("sentinel: monitor closed")
	// errBadReply is a reply this package cannot read.
	errBadReply = errors.New("sentinel: malformed reply")
)

// ReplyError is an error reply ("-ERR ...", "-NOAUTH ...") from a
// Sentinel or a server.
type ReplyError struct {
	// Msg is the error line without its '-'.
	Msg string
}

func (e *ReplyError) Error() string { return "sentinel: server replied: " + e.Msg }

// badReply wraps errBadReply with what was wrong.
func badReply(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadReply}, args...)...)
}
