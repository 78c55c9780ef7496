// Package cluster routes Redis requests over a Redis Cluster by the
// cluster's own slot map, so that cluster-unaware clients reach every slot
// through one proxy address. It is also the redis_cluster pool kind
// (kind.go). What a user configures and sees of it is in
// docs/redis-cluster.md at the repository's root.
//
// # Slots
//
// Slot is Redis Cluster's keyHashSlot: CRC16/XMODEM of the key & 16383,
// hashing only the bytes between the first '{' and the first '}' after it
// when there is at least one (an empty tag "{}" hashes the whole key).
//
// # The slot map
//
// A Cluster reads its map with CLUSTER SHARDS (Redis 7.0+), falling back
// to CLUSTER SLOTS for a node that refuses SHARDS, from the first node that
// answers: the node the last map came from, the map's healthy nodes, then
// the seeds (any live one is enough; a seed may be down). It reads it again
// every Config.RefreshInterval (default 5s), after a MOVED reply, after a
// node fails a request, and after a -CLUSTERDOWN reply. Refreshes run on one
// goroutine, so they are single-flight; those asked for are spaced 100ms
// apart (1s while refreshes fail), and requests never wait for them: they
// are routed by the map in use. A MOVED reply also changes the map in use
// at once for its slot (copy on write), and is applied again on top of a
// refresh that was already under way. Only until the first refresh ends do
// requests wait (at most 16384 of them); if it fails they, and later
// requests until a map arrives, are answered "-CLUSTERDOWN shardproxy has
// no cluster slot map: <node>: <reason>" while the refresher keeps trying
// (every second while asked, and every RefreshInterval). A server that is
// no cluster node answers CLUSTER SHARDS with "-ERR This instance has
// cluster support disabled": that is the reason given, and it is logged at
// Error level once (recovery at Info). A map with no slot assigned (a node
// that has not joined yet) counts as no map.
//
// # Nodes
//
// Each node of the map is a backend.Backend, created when a map (or a
// redirect) first names it; it dials on its own goroutine when its first
// request is queued (never on a reply's path: redirects only queue).
// Replica nodes are separate backends whose sockets send READONLY after
// the handshake (AUTH with Config.Node.Handshake, PING); they exist only
// under ReadPreferReplica and ReadReplica, and only for replicas CLUSTER
// SHARDS reports "online" (a replica that has replicated nothing yet is
// reported "loading"). A node that leaves the map is closed once it has no
// request in flight (after at most 10s); a request that still reaches a
// closed node was never sent, and is routed again. The map itself is read
// on the refresher's own connection, never on a node's backend.
//
// # Requests
//
// Route takes a parsed resp request. RouteKey goes to the master serving
// its key's slot; RouteSame (MSETNX, SINTER, EVAL with keys, ...) likewise
// when all keys share one slot, else -CROSSSLOT "Keys in request don't
// hash to the same slot", as a cluster node words it; RouteMulti (MGET,
// MSET, DEL, UNLINK, EXISTS, TOUCH) is split per slot (a cluster node
// refuses keys of two slots even when it serves both) with resp's Split and
// merged with its Merge; RouteAny goes to one master; RouteAll (FLUSHDB,
// SCRIPT LOAD, KEYS, ...) to every master serving slots; RouteServer (SCAN)
// to the master its Target numbers, the masters taken in the order of the
// first slot each serves, never a replica. With ReadPreferReplica or
// ReadReplica, commands redis-server flags read-only (ReadOnly) go to a
// healthy replica of the slot's master, chosen by the client's hint.
//
// Replies are acted on in the Done callback of the backend call, which
// sends the call again when needed and never blocks:
//
//   - -MOVED slot host:port: the slot's owner in the map in use becomes
//     that node, a refresh is asked for, and the request goes there.
//   - -ASK slot host:port: the request goes to that node once as one call
//     whose wire is ASKING followed by the command; the node's dialect
//     frames the two replies ("+OK" and the command's) as one. A call is
//     written in one piece on one socket, so nothing from another client
//     can come between ASKING and its command.
//   - More than Config.MaxRedirects (5) MOVED and ASK replies for one
//     request end it with "-ERR too many cluster redirects for slot N".
//     A malformed redirect is never followed; the client gets it as it is.
//   - -TRYAGAIN (a multi-key request during a slot's migration) is retried
//     after 5ms, doubling up to 100ms, Config.TryAgain (16) times (1.3s in
//     all); then the
//     client gets it.
//   - -CLUSTERDOWN goes to the client, and a refresh is asked for.
//   - A request that gets no reply (node down, timeout) is answered
//     "-ERR node host:port: backend failure: <cause>" and a refresh is
//     asked for; it is not retried, as it may have been executed. Two
//     exceptions were certainly not sent: a call to a node closed because
//     it left the map goes again by the current map, and under
//     ReadPreferReplica a read a replica could not take (not connected,
//     marked bad) goes to the master.
//
// One client's requests use one socket per node (the hint), so their
// order holds, except that a request redirected (or retried after
// TRYAGAIN) may be overtaken by a later request of the same pipeline.
//
// # What cluster does not do
//
// It does not parse client requests, word anything but errors (the
// dialect does), or answer CLUSTER commands: resp refuses CLUSTER INFO,
// SLOTS, NODES, ASKING and READONLY from clients ("-ERR CLUSTER INFO is not
// supported by shardproxy: shardproxy is not a Redis Cluster node"), so a
// cluster-aware client gets a clear error and must be used in its plain
// (single-node) mode. It imports codec, resp and backend only.
//
// # Concurrency and ownership
//
// All methods of Cluster are safe for concurrent use. Route keeps req (and
// its Wire and Keys) until it calls Complete, and never after. A SlotMap is
// immutable. Stats are counters read atomically.
package cluster
