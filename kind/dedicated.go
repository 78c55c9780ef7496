package kind

import (
	"strconv"
	"sync"
	"sync/atomic"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/route"
)

// Dedicator is a router whose clients may have a server connection of
// their own: Redis blocking commands and transactions (codec.RouteBlock,
// codec.RoutePin; the proxy's pin.go), and subscriptions (its pubsub.go).
// Sharded and cluster Redis pools are. The session asks a router for it
// with a type assertion; a router that is not one serves none of these.
type Dedicator interface {
	// Place returns the backend every key of req lives on and where that
	// is: a number that keys on the same server (a cluster: in the same
	// slot) share, -1 for a request without keys, which goes to the
	// server hint picks. A request it cannot place gets refusal, the
	// error reply the client sees (keys in different places, no slot
	// map, every server ejected).
	Place(req *codec.Request, hint uint32) (b *backend.Backend, where int, refusal []byte)
	// Dedicated returns the router's dedicated connections.
	Dedicated() *DedicatedPool
	// PatternServers returns the servers a pattern subscription goes
	// to, or the error reply the client gets.
	PatternServers() ([]*backend.Backend, []byte)
}

// DedicatedPool holds a Redis pool's dedicated connections: for each
// server, at most limit in use (blocking_connections) and those given back
// in good order kept idle for the next client. It is safe for concurrent
// use.
type DedicatedPool struct {
	limit int

	mu      sync.Mutex
	servers map[*backend.Backend]*dedicatedSet
	closed  bool

	scripts map[*backend.Backend]int // scripts running per server (RunScript)
	running atomic.Int64             // scripts running on every server
	ordered atomic.Int64             // blocking commands ordered, not yet written (Order)
	blocked atomic.Bool              // a blocking command was ever ordered (HasBlocked)

	inUse   atomic.Int64 // gauge: connections taken, not given back
	idle    atomic.Int64 // gauge: connections kept for reuse
	refused atomic.Int64 // counter: requests refused at the limit

	// The session's own figures, which it counts as its clients pin,
	// block and subscribe; Counters reports them with the pool's.
	Pinned        atomic.Int64 // gauge: clients in a transaction (WATCH, MULTI)
	Blocked       atomic.Int64 // gauge: blocking commands waiting for their reply
	Subscribed    atomic.Int64 // gauge: clients in subscribed mode
	Subscriptions atomic.Int64 // gauge: their channels, patterns and shard channels
	SubDropped    atomic.Int64 // counter: subscribers disconnected (slow, or a server lost)
}

// dedicatedSet is one server's dedicated connections. Idle ones are kept
// apart by the protocol version their handshake asked for (RESP2, RESP3):
// a client gets one that speaks its own. The limit counts both.
type dedicatedSet struct {
	turns []*turn // blocking commands ordered, not yet written, by arrival (Order)
	inUse int
	idle  []*backend.Dedicated
	idle3 []*backend.Dedicated // Proto 3
}

// idleOf returns the idle list for connections of protocol proto.
func (set *dedicatedSet) idleOf(proto uint8) *[]*backend.Dedicated {
	if proto != 0 {
		return &set.idle3
	}
	return &set.idle
}

// NewDedicatedPool returns an empty pool of at most limit connections in
// use per server; limit <= 0 means 64.
func NewDedicatedPool(limit int) *DedicatedPool {
	if limit <= 0 {
		limit = 64
	}
	return &DedicatedPool{limit: limit, servers: map[*backend.Backend]*dedicatedSet{}, scripts: map[*backend.Backend]int{}}
}

// Take returns a connection to b speaking protocol version proto for one
// client, or the error reply the client gets when b already has limit
// connections in use or is closed.
func (dp *DedicatedPool) Take(b *backend.Backend, proto uint8, d codec.Dialect) (*backend.Dedicated, []byte) {
	return dp.acquire(b, d, func(set *dedicatedSet) (ded *backend.Dedicated, spent []*backend.Dedicated) {
		idle := set.idleOf(proto)
		for len(*idle) > 0 && ded == nil {
			n := len(*idle) - 1
			c := (*idle)[n]
			(*idle)[n] = nil
			*idle = (*idle)[:n]
			dp.idle.Add(-1)
			if c.Spent() { // its socket died while idle (a server restart, its idle timeout)
				spent = append(spent, c)
			} else {
				ded = c
			}
		}
		if ded == nil {
			ded = b.Dedicate(proto)
		}
		return ded, spent
	})
}

// TakePush returns a push-mode connection to b (backend.DedicatePush)
// for one client's subscriptions, counted against the same limit as
// Take's, or the error reply the client gets. Give it back with reuse
// false: a subscribed connection is never kept.
func (dp *DedicatedPool) TakePush(b *backend.Backend, d codec.Dialect, fn backend.PushFunc) (*backend.Dedicated, []byte) {
	return dp.acquire(b, d, func(*dedicatedSet) (*backend.Dedicated, []*backend.Dedicated) {
		return b.DedicatePush(fn), nil
	})
}

// acquire is Take's and TakePush's common part: it refuses when b has
// limit connections in use or the pool is closed, else calls open with
// mu held and b's set, and counts the connection open returns (nil when
// b is closed) as in use. The spent connections open returns are closed
// after mu is released.
func (dp *DedicatedPool) acquire(b *backend.Backend, d codec.Dialect, open func(*dedicatedSet) (*backend.Dedicated, []*backend.Dedicated)) (*backend.Dedicated, []byte) {
	dp.mu.Lock()
	set := dp.servers[b]
	if set == nil {
		set = &dedicatedSet{}
		dp.servers[b] = set
	}
	if set.inUse >= dp.limit || dp.closed {
		dp.mu.Unlock()
		dp.refused.Add(1)
		return nil, d.AppendError(nil, codec.ErrServer, "no dedicated connection free for server "+b.Name()+
			": "+strconv.Itoa(dp.limit)+" in use (blocking_connections)")
	}
	ded, spent := open(set)
	if ded != nil {
		set.inUse++
		dp.inUse.Add(1)
	}
	dp.mu.Unlock()
	for _, c := range spent {
		go c.Close()
	}
	if ded == nil {
		return nil, d.AppendError(nil, codec.ErrServer, backend.ErrorFor(backend.CauseClosed).Error())
	}
	return ded, nil
}

// Give takes back a connection Take or TakePush returned. One that is clean (reuse:
// the client left no state on it) and not spent is kept for the next
// client; any other is closed. It never blocks: backends call it from
// their goroutines.
func (dp *DedicatedPool) Give(ded *backend.Dedicated, reuse bool) {
	dp.mu.Lock()
	if set := dp.servers[ded.Backend()]; set != nil {
		set.inUse--
		dp.inUse.Add(-1)
		idle := set.idleOf(ded.Proto())
		if reuse && !dp.closed && !ded.Spent() && len(*idle) < dp.limit {
			*idle = append(*idle, ded)
			dp.idle.Add(1)
			ded = nil
		}
	}
	dp.mu.Unlock()
	if ded != nil {
		go ded.Close()
	}
}

// Close closes the idle connections; those in use close when given back.
func (dp *DedicatedPool) Close() {
	dp.mu.Lock()
	dp.closed = true
	var idle []*backend.Dedicated
	for _, set := range dp.servers {
		idle = append(append(idle, set.idle...), set.idle3...)
		dp.idle.Add(-int64(len(set.idle) + len(set.idle3)))
		set.idle, set.idle3 = nil, nil
	}
	dp.mu.Unlock()
	for _, d := range idle {
		d.Close()
	}
}

// Counters are the pool's figures, for the router's Stats; as a
// CounterSource, its refusals outlive the router (Counters).
func (dp *DedicatedPool) Counters() []route.Stat {
	c, g := route.Counter, route.Gauge
	return []route.Stat{
		{Name: "dedicated_connections", Kind: g, Value: dp.inUse.Load(), Help: "Server connections dedicated to one client now (blocking commands, transactions)."},
		{Name: "dedicated_idle", Kind: g, Value: dp.idle.Load(), Help: "Dedicated server connections kept open for the next client."},
		{Name: "pinned_clients", Kind: g, Value: dp.Pinned.Load(), Help: "Clients in a transaction (after WATCH or MULTI)."},
		{Name: "blocked_clients", Kind: g, Value: dp.Blocked.Load(), Help: "Blocking commands waiting for their reply."},
		{Name: "dedicated_refused", Kind: c, Value: dp.refused.Load(), Help: "Requests refused because blocking_connections were in use."},
		{Name: "subscribed_clients", Kind: g, Value: dp.Subscribed.Load(), Help: "Clients in pub/sub subscribed mode."},
		{Name: "subscriptions", Kind: g, Value: dp.Subscriptions.Load(), Help: "Channels, patterns and shard channels the subscribed clients hold."},
		{Name: "subscribers_dropped", Kind: c, Value: dp.SubDropped.Load(), Help: "Subscribed clients disconnected: too slow to read their messages, or a server connection lost."},
	}
}

// AppendCrossSlot appends redis-server's refusal of keys in different
// slots (in a sharded pool: on different servers), in d's words.
func AppendCrossSlot(dst []byte, d codec.Dialect) []byte {
	return d.AppendError(dst, codec.ErrCrossServer, "Keys in request don't hash to the same slot")
}
