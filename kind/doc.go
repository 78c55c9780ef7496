// Package kind is the contract between the proxy and its pool kinds, the
// ways of answering a pool's requests (the sharded kind in package shard,
// Redis Cluster in cluster, a Lua route file in lua). It owns:
//
//   - Kind, what a kind does (build a pool's route.Router, describe it for
//     the "pool listening" line), and the registry of kinds by
//     config.Kind, which each kind package fills from its init
//     (Register), as dialects fill codec's; the same init registers the
//     kind's config rules with config (config.RegisterKind), which decide
//     which pools are of the kind and check their keys;
//   - Env, what a build is given: the pool's configuration, dialect and
//     limits, the running router it may carry state from, the backend
//     lease, the server's hooks (backend state, server_protocol auto,
//     watching backends, linking pools once all are built), and a
//     fleet's ring (Ring) with RingFollower, what the proxy asks of a
//     router whose distribution follows it;
//   - what several kinds share: Counters, which keep a router's counters
//     whole across reloads, and Holds for a cache handed from router to
//     router; DedicatedPool, the Redis pools' connections dedicated to
//     one client, and Dedicator, what the proxy's session asks of a
//     router that offers them.
//
// It holds nothing of any one kind and must not import one, nor the
// proxy: the proxy imports the kinds (its kinds.go) and looks them up by
// name.
//
// Concurrency: Register runs at init, Lookup at any time. Counters,
// Holds and DedicatedPool are safe for concurrent use; DedicatedPool's
// Give never blocks, so backends may call it from their goroutines. An
// Env belongs to one build, on the goroutine that builds the generation;
// its hooks may be kept and called later (OnStateChange, OnMeta from
// backend goroutines).
package kind
