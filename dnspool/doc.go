// Package dnspool gives pools their servers from DNS (config.ServersFrom,
// the servers_from key): per pool, a watcher asks a DNS server for an SRV
// name (one server per target, named by the target, so that ketama places
// a target's keys where it placed them before, whatever other targets come
// and go) or for A or AAAA records (one server per address, at the
// configured port), again every interval.
//
// What a watcher will not do is the guard of a pool's ring: a failed
// answer (timeout, SERVFAIL, an unreachable server) or an empty one
// (NXDOMAIN, no records) keeps the last good set; an answer changing more
// than max_change of the servers at once, or listing more than
// max_servers, is held until the next resolution gives the same answer,
// and only then applied. Each is counted (Stats) and logged once per
// change of state, not per resolution.
//
// A Group holds the watchers of one running configuration. Resolve gives a
// copy of a configuration whose servers_from pools have the watchers'
// current servers (the configuration it is given is never changed); the
// command hands that copy to the proxy's reload, and re-applies its
// source's configuration when OnChange says a set changed, so a DNS change
// takes the same path as a reload (unchanged backends keep their sockets).
//
// SRV weight and priority: only the targets of the lowest priority are
// servers (a higher priority is a fallback in SRV's meaning, and the proxy
// ejects servers itself); every server has weight 1, because DNS servers
// such as Kubernetes' rescale SRV weights as targets come and go, which
// would move every key of a weighted ketama ring.
//
// It imports config and github.com/miekg/dns only; it knows nothing of the
// proxy. Concurrency: every exported method is safe for concurrent use;
// each watcher runs one goroutine, stopped by Sync or Close.
package dnspool
