package backend

import "sync/atomic"

// Stats are a backend's counters, named after twemproxy's server stats.
// Fields are updated atomically and may be read at any time.
type Stats struct {
	Requests      atomic.Int64 // requests sent (or queued to send)
	RequestBytes  atomic.Int64
	Responses     atomic.Int64 // replies received
	ResponseBytes atomic.Int64
	Timeouts      atomic.Int64 // requests failed by timeout (server_timedout)
	EOF           atomic.Int64 // sockets closed by the server (server_eof)
	Errors        atomic.Int64 // other socket failures (server_err)
	Failures      atomic.Int64 // all socket failures
	Ejects        atomic.Int64 // times marked bad
	EjectedAt     atomic.Int64 // unix micros of the last mark-bad (server_ejected_at)
	Connections   atomic.Int64 // open sockets (server_connections)
	InQueue       atomic.Int64 // requests queued, not yet written (in_queue)
	OutQueue      atomic.Int64 // requests written, awaiting reply (out_queue)
}

// Stats returns the backend's live counters.
func (b *Backend) Stats() *Stats { return &b.stats }
