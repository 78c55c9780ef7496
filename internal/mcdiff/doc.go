// Package mcdiff is test support for differential tests of memcached
// servers: a generator of random request sequences over a small key space
// (every text and meta storage command, noreply and quiet forms, random
// flags, values up to 1 MiB, CAS races on the CAS values a server returned,
// malformed lines), a Target that sends one request to a server socket and
// reads exactly its reply, and a normaliser that blanks what legitimately
// differs between two correct servers.
//
// It imports nothing of shardproxy, so any package's tests can run the same
// sequences against memcached, the store, or the proxy's socket.
//
// A Gen, a Session and a ConnTarget are for one goroutine at a time.
package mcdiff
