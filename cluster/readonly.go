package cluster

// readOnly holds the commands (codec.Request.Name, "container|sub" for
// subcommands) that redis-server 7.0.15 flags "readonly" and that have
// keys: those a replica serves after READONLY. Only they go to replicas
// under ReadPreferReplica and ReadReplica. The list was taken from COMMAND
// (flags contain "readonly", first key > 0 or movablekeys).
var readOnly = func() map[string]bool {
	m := map[string]bool{}
	for _, name := range []string{
		"bitcount", "bitfield_ro", "bitpos", "dump", "eval_ro", "evalsha_ro",
		"exists", "expiretime", "fcall_ro", "geodist", "geohash", "geopos",
		"georadius_ro", "georadiusbymember_ro", "geosearch", "get", "getbit",
		"getrange", "hexists", "hget", "hgetall", "hkeys", "hlen", "hmget",
		"hrandfield", "hscan", "hstrlen", "hvals", "lcs", "lindex", "llen",
		"lpos", "lrange", "memory|usage", "mget", "object|encoding",
		"object|freq", "object|idletime", "object|refcount", "pexpiretime",
		"pfcount", "pttl", "scard", "sdiff", "sinter", "sintercard",
		"sismember", "smembers", "smismember", "sort_ro", "srandmember",
		"sscan", "strlen", "substr", "sunion", "touch", "ttl", "type",
		"xinfo|consumers", "xinfo|groups", "xinfo|stream", "xlen", "xpending",
		"xrange", "xread", "xrevrange", "zcard", "zcount", "zdiff", "zinter",
		"zintercard", "zlexcount", "zmscore", "zrandmember", "zrange",
		"zrangebylex", "zrangebyscore", "zrank", "zrevrange",
		"zrevrangebylex", "zrevrangebyscore", "zrevrank", "zscan", "zscore",
		"zunion",
	} {
		m[name] = true
	}
	return m
}()

// ReadOnly reports whether the command named name (codec.Request.Name)
// only reads, so a replica may serve it.
func ReadOnly(name string) bool { return readOnly[name] }
