package config_test

// The kinds' rules (config.KindRules) live in their packages, which
// import config; this external test file links them, so the package's
// tests, internal ones too, parse every kind of pool as the proxy does.
import (
	_ "shardproxy/cluster"
	_ "shardproxy/combine"
	_ "shardproxy/lua"
	_ "shardproxy/shard"
)
