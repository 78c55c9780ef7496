// Package sentinel follows Redis masters through Redis Sentinel, so that a
// sharded pool whose servers are Sentinel master names sends each shard's
// traffic to its current master.
//
// # What a Monitor does
//
// A Monitor asks every Sentinel of Config.Sentinels for every master of
// Config.Masters (SENTINEL get-master-addr-by-name) at New, every
// Config.Refresh (5s), when Refresh is called (the proxy calls it when a
// master's backend is marked bad), and one second after a resolve that
// left a master unknown. Of the addresses the Sentinels give for a master,
// the one most of them give comes first (the current address first among
// equals); if it is the current address, nothing changes; else the
// address is checked before it is used: a connection to the server
// (with Config.ServerAuth and ServerTLS) must answer ROLE with "master".
// An address that answers anything else (a replica, a Sentinel: a stale
// or lying Sentinel) is refused, counted (Stats.Rejected) and logged, and
// the next answer is checked; an address that cannot be reached is
// skipped. A Sentinel that is down or answers an error is skipped; any one
// that answers is enough.
//
// Besides, one connection per Sentinel stays subscribed to +switch-master
// (reconnecting after 100ms, doubling to 1s, pinged every second so that
// a silent Sentinel is noticed within 3s). An event for a followed master
// names the new master's address, which is checked with ROLE as above and
// then used at once; each Sentinel sends its own event for one failover,
// and only the first changes anything. Every (re)subscription asks for a
// resolve, as events may have been missed meanwhile.
//
// Config.OnSwitch hears of each master's first address and of every
// change, on the resolver goroutine, in order; it never hears of an
// address that did not answer ROLE "master" when it was checked.
//
// # What it does not do
//
// With Config.OnReplicas, every resolve also asks the Sentinels for each
// master's replicas (SENTINEL REPLICAS), and the subscriptions add +slave,
// +sdown and -sdown, an event about a followed master's replica asking for
// a resolve. A Prober checks that a server is a replica with its link to
// its master up (ROLE), for the proxy's replica reads.
//
// It does not route requests or hold connections to the masters: the
// proxy's backends do (a new address is a new backend). It does not
// discover Sentinels (no SENTINEL sentinels). It speaks RESP2 only, and
// reads its replies with bounded sizes (see readValue).
//
// # Concurrency
//
// All methods of Monitor are safe for concurrent use. Goroutines: one
// resolver (asks, checks, calls OnSwitch), and per Sentinel a subscriber
// and, while subscribed, its pinger. Close stops them all and waits.
//
// It imports nothing of shardproxy.
package sentinel
