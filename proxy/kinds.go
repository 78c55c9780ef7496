package proxy

// The pool kinds register themselves with package kind (kind.Register,
// from their init): importing them here, in the one place, gives the
// server, its tests and cmd/shardproxy every kind. A new kind is a
// package of its own and a line here.
import (
	_ "shardproxy/cluster"
	_ "shardproxy/combine"
	_ "shardproxy/lua"
	_ "shardproxy/shard"
)
