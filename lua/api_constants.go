package lua

// memcached proxy constants, numbered exactly as memcached 1.6 numbers them
// (proxy.h enum proxy_defines, mcmc.h, enum mcp_await_e), so that scripts
// comparing against literal numbers keep working.

// Command numbers of a memcached pool (mcp.CMD_*). CMD_END_STORAGE ends the
// key-carrying commands that CMD_ANY_STORAGE attaches to.
const (
	cmdMG = iota + 1
	cmdMS
	cmdMD
	cmdMN
	cmdMA
	cmdME
	cmdGET
	cmdGAT
	cmdSET
	cmdADD
	cmdCAS
	cmdGETS
	cmdGATS
	cmdINCR
	cmdDECR
	cmdTOUCH
	cmdAPPEND
	cmdDELETE
	cmdREPLACE
	cmdPREPEND
	cmdEndStorage
	cmdQUIT
	cmdSTATS
	cmdSLABS
	cmdWATCH
	cmdLRU
	cmdVERSION
	cmdSHUTDOWN
	cmdEXTSTORE
	cmdFLUSHALL
	cmdVERBOSITY
	cmdLRUCRAWLER
	cmdREFRESHCERTS
	cmdCACHEMEMLIMIT
	cmdSize
	cmdAny
	cmdAnyStorage
)

// mcCommands names the memcached commands in CMD_* order; the index is the
// command number.
var mcCommands = [cmdSize]string{
	cmdMG: "mg", cmdMS: "ms", cmdMD: "md", cmdMN: "mn", cmdMA: "ma", cmdME: "me",
	cmdGET: "get", cmdGAT: "gat", cmdSET: "set", cmdADD: "add", cmdCAS: "cas",
	cmdGETS: "gets", cmdGATS: "gats", cmdINCR: "incr", cmdDECR: "decr",
	cmdTOUCH: "touch", cmdAPPEND: "append", cmdDELETE: "delete",
	cmdREPLACE: "replace", cmdPREPEND: "prepend", cmdQUIT: "quit",
	cmdSTATS: "stats", cmdSLABS: "slabs", cmdWATCH: "watch", cmdLRU: "lru",
	cmdVERSION: "version", cmdSHUTDOWN: "shutdown", cmdEXTSTORE: "extstore",
	cmdFLUSHALL: "flush_all", cmdVERBOSITY: "verbosity",
	cmdLRUCRAWLER: "lru_crawler", cmdREFRESHCERTS: "refresh_certs",
	cmdCACHEMEMLIMIT: "cache_memlimit",
}

// mcConstNames are the mcp.CMD_* names, by command number.
var mcConstNames = [cmdSize]string{
	cmdMG: "CMD_MG", cmdMS: "CMD_MS", cmdMD: "CMD_MD", cmdMN: "CMD_MN",
	cmdMA: "CMD_MA", cmdME: "CMD_ME", cmdGET: "CMD_GET", cmdGAT: "CMD_GAT",
	cmdSET: "CMD_SET", cmdADD: "CMD_ADD", cmdCAS: "CMD_CAS", cmdGETS: "CMD_GETS",
	cmdGATS: "CMD_GATS", cmdINCR: "CMD_INCR", cmdDECR: "CMD_DECR",
	cmdTOUCH: "CMD_TOUCH", cmdAPPEND: "CMD_APPEND", cmdDELETE: "CMD_DELETE",
	cmdREPLACE: "CMD_REPLACE", cmdPREPEND: "CMD_PREPEND",
	cmdEndStorage: "CMD_END_STORAGE", cmdQUIT: "CMD_QUIT", cmdSTATS: "CMD_STATS",
	cmdSLABS: "CMD_SLABS", cmdWATCH: "CMD_WATCH", cmdLRU: "CMD_LRU",
	cmdVERSION: "CMD_VERSION", cmdSHUTDOWN: "CMD_SHUTDOWN",
	cmdEXTSTORE: "CMD_EXTSTORE", cmdFLUSHALL: "CMD_FLUSH_ALL",
	cmdVERBOSITY: "CMD_VERBOSITY", cmdLRUCRAWLER: "CMD_LRU_CRAWLER",
	cmdREFRESHCERTS: "CMD_REFRESH_CERTS", cmdCACHEMEMLIMIT: "CMD_CACHE_MEMLIMIT",
}

// mcCommandIndex maps command names to CMD_* numbers.
var mcCommandIndex = func() map[string]int {
	m := make(map[string]int, len(mcCommands))
	for i, n := range mcCommands {
		if n != "" {
			m[n] = i
		}
	}
	return m
}()

// mcCommandNumber returns the CMD_* number of a memcache request name, or
// 0. Every request asks it (hooks, the lock-free way): the commonest names
// are compared first, which costs less than hashing for the map.
func mcCommandNumber(name string) int {
	switch name {
	case "get":
		return cmdGET
	case "set":
		return cmdSET
	case "mg":
		return cmdMG
	case "ms":
		return cmdMS
	case "gets":
		return cmdGETS
	case "delete":
		return cmdDELETE
	case "md":
		return cmdMD
	}
	return mcCommandIndex[name]
}

// Response codes (mcmc.h MCMC_CODE_*), status values (MCMC_OK, MCMC_ERR)
// and P_OK.
const (
	mcmcOK          = 0
	mcmcErr         = -1
	codeStored      = 8
	codeExists      = 9
	codeDeleted     = 10
	codeTouched     = 11
	codeVersion     = 12
	codeNotFound    = 13
	codeNotStored   = 14
	codeOK          = 15
	codeNop         = 16
	codeEnd         = 17
	codeError       = 21
	codeClientError = 22
	codeServerError = 23
)

// Await modes (enum mcp_await_e).
const (
	awaitGood = iota
	awaitAny
	awaitOK
	awaitFirst
	awaitFastGood
	awaitBackground
)

// Wait modes of the V2 request context (enum mcp_rqueue_e) and result
// flags of its slots (RQUEUE_R_*). waitHandle and waitSleep are internal:
// memcached exposes no mcp.WAIT_HANDLE, rctx:wait_handle is that mode.
const (
	waitIdle = iota
	waitAny
	waitOK
	waitGood
	waitFastGood
	waitHandle
	waitSleep
)

const (
	resResume = 1 << 1
	resGood   = 1 << 3
	resOK     = 1 << 4
	resAny    = 1 << 5
	resError  = 1 << 7
)

// numericConstants are set on the mcp table of every state, whatever the
// pool's protocol.
var numericConstants = map[string]int{
	"MCMC_CODE_STORED":     codeStored,
	"MCMC_CODE_EXISTS":     codeExists,
	"MCMC_CODE_DELETED":    codeDeleted,
	"MCMC_CODE_TOUCHED":    codeTouched,
	"MCMC_CODE_VERSION":    codeVersion,
	"MCMC_CODE_NOT_FOUND":  codeNotFound,
	"MCMC_CODE_NOT_STORED": codeNotStored,
	"MCMC_CODE_OK":         codeOK,
	"MCMC_CODE_NOP":        codeNop,
	"MCMC_CODE_END":        codeEnd,
	// memcached 1.6.12 to 1.6.17 gave a miss its own code, MCMC_CODE_MISS
	// (19); later versions give it END and have no MISS (nil). A miss is
	// END here, so MISS is END's value: an old script comparing
	// res:code() with it still sees its misses.
	"MCMC_CODE_MISS":         codeEnd,
	"MCMC_CODE_ERROR":        codeError,
	"MCMC_CODE_CLIENT_ERROR": codeClientError,
	"MCMC_CODE_SERVER_ERROR": codeServerError,
	"MCMC_ERR":               mcmcErr,
	"P_OK":                   mcmcOK,
	"AWAIT_GOOD":             awaitGood,
	"AWAIT_ANY":              awaitAny,
	"AWAIT_OK":               awaitOK,
	"AWAIT_FIRST":            awaitFirst,
	"AWAIT_FASTGOOD":         awaitFastGood,
	"AWAIT_BACKGROUND":       awaitBackground,
	"WAIT_ANY":               waitAny,
	"WAIT_OK":                waitOK,
	"WAIT_GOOD":              waitGood,
	"WAIT_FASTGOOD":          waitFastGood,
	"RES_GOOD":               resGood,
	"RES_OK":                 resOK,
	"RES_ANY":                resAny,
}

// redisCommands are the Redis commands a Redis pool names as mcp.CMD_<NAME>
// (upper case) = "<name>" (the lower-case string r:command() returns). Any
// other command can be attached by its name as a string.
var redisCommands = []string{
	// strings
	"get", "set", "setnx", "setex", "psetex", "getset", "getdel", "getex",
	"mget", "mset", "msetnx", "append", "strlen", "incr", "incrby",
	"incrbyfloat", "decr", "decrby", "setrange", "getrange", "substr", "lcs",
	// keys
	"del", "unlink", "exists", "expire", "expireat", "pexpire", "pexpireat",
	"expiretime", "pexpiretime", "persist", "ttl", "pttl", "type", "touch",
	"dump", "restore", "rename", "renamenx", "copy", "object", "sort",
	"sort_ro",
	// hashes
	"hget", "hset", "hsetnx", "hmget", "hmset", "hdel", "hexists", "hgetall",
	"hkeys", "hvals", "hlen", "hincrby", "hincrbyfloat", "hstrlen", "hscan",
	"hrandfield",
	// lists
	"lpush", "rpush", "lpushx", "rpushx", "lpop", "rpop", "llen", "lrange",
	"lindex", "lset", "lrem", "ltrim", "linsert", "lpos", "lmove", "rpoplpush",
	"blpop", "brpop", "blmove", "brpoplpush",
	// sets
	"sadd", "srem", "smembers", "sismember", "smismember", "scard", "spop",
	"srandmember", "sscan", "sinter", "sinterstore", "sunion", "sunionstore",
	"sdiff", "sdiffstore", "smove", "sintercard",
	// sorted sets
	"zadd", "zrem", "zscore", "zmscore", "zincrby", "zcard", "zcount",
	"zrange", "zrangebyscore", "zrangebylex", "zrevrange", "zrevrangebyscore",
	"zrevrangebylex", "zrank", "zrevrank", "zremrangebyrank",
	"zremrangebyscore", "zremrangebylex", "zlexcount", "zscan", "zpopmin",
	"zpopmax", "zrandmember", "zunionstore", "zinterstore", "zrangestore",
	// hyperloglog, bitmaps, geo, streams
	"pfadd", "pfcount", "pfmerge", "setbit", "getbit", "bitcount", "bitpos",
	"bitfield", "bitfield_ro", "geoadd", "geopos", "geodist", "geohash",
	"georadius", "georadiusbymember", "geosearch", "xadd", "xlen", "xrange",
	"xrevrange", "xdel", "xtrim", "xread",
	// scripting and server
	"eval", "evalsha", "eval_ro", "evalsha_ro", "script", "ping", "echo",
	"info", "time", "dbsize", "flushall", "flushdb", "keys", "scan",
	"randomkey", "command", "quit", "select", "auth",
}
