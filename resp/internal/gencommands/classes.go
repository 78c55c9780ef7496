package main

// This file is the hand-written half of the command table: how shardproxy
// carries each Redis command. The generator merges it with what a real
// redis-server reports (arity, flags, key positions) and fails when the
// server has a command with movable keys that nothing here decides on.

// class is the route class of a command, named after the resp package's
// identifiers.
type class string

const (
	unsupported class = "classUnsupported" // answered with an error naming reason
	key         class = "classKey"         // one key: codec.RouteKey
	multi       class = "classMulti"       // split per server: codec.RouteMulti
	same        class = "classSame"        // every key on one server: codec.RouteSame
	local       class = "classLocal"       // answered by the proxy: codec.RouteLocal
	anyServer   class = "classAny"         // any one server: codec.RouteAny
	all         class = "classAll"         // every server, replies merged: codec.RouteAll
	server      class = "classServer"      // the server the request names: codec.RouteServer
	container   class = "classContainer"   // dispatched on its subcommand
	block       class = "classBlock"       // may block: a dedicated connection, codec.RouteBlock
	pin         class = "classPin"         // connection state: the client's pinned connection, codec.RoutePin
	sub         class = "classSub"         // pub/sub: the client's subscriber connections, codec.RouteSubscribe
)

// blockRule names where a blocking command's timeout is.
type blockRule string

const (
	blockLast  blockRule = "blockLast"  // the last argument, in seconds (BLPOP, BLMOVE, ...)
	blockFirst blockRule = "blockFirst" // argument 1, in seconds (BLMPOP, BZMPOP)
	blockMs2   blockRule = "blockMs2"   // argument 2, in milliseconds (WAIT)
)

// keyRule names how the keys of a command with movable keys are found.
type keyRule string

const (
	keysRange   keyRule = "keysRange"   // first, last, step
	keysNumkeys keyRule = "keysNumkeys" // the range, then numkeys keys after the count at keyArg
	keysStreams keyRule = "keysStreams" // XREAD/XREADGROUP: half the arguments after STREAMS
	keysSort    keyRule = "keysSort"    // SORT: key 1 and the last STORE destination
	keysGeo     keyRule = "keysGeo"     // GEORADIUS*: key 1, the first STORE and STOREDIST destinations from keyArg on
	keysChannel keyRule = "keysChannel" // PUBLISH: the channel, argument 1, routed as a key
	keysAllArgs keyRule = "keysAllArgs" // (P)SUBSCRIBE, (P)UNSUBSCRIBE: every argument, channels or patterns
)

// Why a command is not carried; the client sees
// "-ERR <COMMAND> is not supported by shardproxy: <reason>".
const (
	rEvery       = "it needs every server"
	rBlocking    = "it blocks the server connection"
	rPubSub      = "pub/sub needs a server connection of its own"
	rTransaction = "transactions need a server connection of their own"
	rAdmin       = "it administers a single server"
	rNoKey       = "it names no key to route by"
	rCluster     = "shardproxy is not a Redis Cluster node"
	rConnection  = "it changes the shared server connection"
	rMove        = "it moves keys to another database or server"
	rFunctions   = "functions must be managed on every server"
	rCrash       = "it stops, restarts or breaks a server"
	rPopulate    = "it makes keys on servers that do not own them"
)

// override decides on one command ("get") or subcommand ("client|setname").
type override struct {
	class     class
	keys      keyRule
	keyArg    int       // keysNumkeys: the argument holding the key count; keysGeo: where options start
	local     string    // classLocal: the resp local-command identifier
	reason    string    // classUnsupported
	subReason string    // a container: why its subcommands without an override are unsupported
	bare      class     // a container that is valid without a subcommand (COMMAND): that class
	block     blockRule // classBlock, and WAIT: where the timeout is
	pin       string    // classPin: the codec.Pin constant
	sub       string    // classSub: the codec.Sub constant
	// every marks a command that spans every server's keys: carried only
	// by pools whose kind can reach every server (codec.Options.Keyspace),
	// refused with reason elsewhere.
	every bool
	// serverConfig marks a CONFIG subcommand that reads or changes every
	// server's settings: carried only by pools whose operator allows it
	// (codec.Options.ServerConfig, key redis_config), refused with reason
	// elsewhere.
	serverConfig bool
	// txOne marks a command for every server that a transaction runs on
	// its own server instead (codec.Request.TxOne): DEBUG inside MULTI.
	txOne bool
	// clusterView marks a cluster command a pool answers itself when it
	// shows its proxies as a Redis Cluster (codec.Options.ClusterView,
	// key redis_cluster_view), refused with reason elsewhere.
	clusterView bool
}

// overrides are keyed by the full lower-case name.
var overrides = map[string]override{
	// Answered by the proxy.
	"ping":   {class: local, local: "localPing"},
	"echo":   {class: local, local: "localEcho"},
	"quit":   {class: local, local: "localQuit"},
	"select": {class: local, local: "localSelect"},
	"auth":   {class: local, local: "localAuth"},
	"hello":  {class: local, local: "localHello"},
	"reset":  {class: local, local: "localReset"},
	"info":   {class: local, local: "localInfo"},

	// Keyless commands whose answer does not depend on the server.
	"time":       {class: anyServer},
	"lolwut":     {class: anyServer},
	"pfselftest": {class: anyServer},

	// Persistence: every server does it, the replies merged (resp/debug.go).
	"save":         {class: all},
	"bgsave":       {class: all},
	"bgrewriteaof": {class: all},
	"pfdebug":      {class: key},

	// Every server. FLUSHALL is also subject to the pool's flush keys
	// (the parser's Deny).
	"flushdb":   {class: all},
	"flushall":  {class: all, every: true, reason: rEvery},
	"keys":      {class: all, every: true, reason: rEvery},
	"randomkey": {class: all, every: true, reason: rEvery},
	"dbsize":    {class: all, every: true, reason: rEvery},
	// One server at a time: the cursor names it.
	"scan": {class: server, every: true, reason: rEvery},

	// Split per server and merged.
	"mget":   {class: multi},
	"mset":   {class: multi},
	"del":    {class: multi},
	"unlink": {class: multi},
	"exists": {class: multi},
	"touch":  {class: multi},

	// Movable keys, found by hand as redis-server's getkeys functions do.
	"sort":              {class: same, keys: keysSort},
	"sort_ro":           {class: key}, // BY/GET patterns are read where the key lives
	"georadius":         {class: same, keys: keysGeo, keyArg: 6},
	"georadiusbymember": {class: same, keys: keysGeo, keyArg: 5},
	"zunionstore":       {class: same, keys: keysNumkeys, keyArg: 2},
	"zinterstore":       {class: same, keys: keysNumkeys, keyArg: 2},
	"zdiffstore":        {class: same, keys: keysNumkeys, keyArg: 2},
	"zunion":            {class: same, keys: keysNumkeys, keyArg: 1},
	"zinter":            {class: same, keys: keysNumkeys, keyArg: 1},
	"zdiff":             {class: same, keys: keysNumkeys, keyArg: 1},
	"zintercard":        {class: same, keys: keysNumkeys, keyArg: 1},
	"sintercard":        {class: same, keys: keysNumkeys, keyArg: 1},
	"lmpop":             {class: same, keys: keysNumkeys, keyArg: 1},
	"zmpop":             {class: same, keys: keysNumkeys, keyArg: 1},
	"eval":              {class: same, keys: keysNumkeys, keyArg: 2},
	"evalsha":           {class: same, keys: keysNumkeys, keyArg: 2},
	"eval_ro":           {class: same, keys: keysNumkeys, keyArg: 2},
	"evalsha_ro":        {class: same, keys: keysNumkeys, keyArg: 2},
	"fcall":             {class: same, keys: keysNumkeys, keyArg: 2},
	"fcall_ro":          {class: same, keys: keysNumkeys, keyArg: 2},
	"xread":             {class: same, keys: keysStreams},                                             // with BLOCK: codec.RouteBlock
	"xreadgroup":        {class: same, keys: keysStreams},                                             // with BLOCK: codec.RouteBlock
	"migrate":           {class: unsupported, reason: rMove},                                          // movable keys, never carried
	"move":              {class: unsupported, reason: rMove},                                          // one key, but another database
	"swapdb":            {class: unsupported, reason: rAdmin},                                         // no admin flag, still one server's business
	"lastsave":          {class: all},                                                                 // the oldest of the servers' (resp/debug.go)
	"role":              {class: unsupported, reason: rAdmin},                                         // @admin category, no admin flag
	"wait":              {class: pin, pin: "codec.PinWait", block: blockMs2},                          // keyless: the pinned server's replicas
	"readonly":          {class: local, local: "localClusterOK", clusterView: true, reason: rCluster}, // cluster replica reads
	"readwrite":         {class: local, local: "localClusterOK", clusterView: true, reason: rCluster},
	"asking":            {class: local, local: "localClusterOK", clusterView: true, reason: rCluster},
	"restore-asking":    {class: unsupported, reason: rCluster},

	// Blocking commands: a connection of the client's own while they wait.
	"blpop":      {class: block, block: blockLast},
	"brpop":      {class: block, block: blockLast},
	"brpoplpush": {class: block, block: blockLast},
	"blmove":     {class: block, block: blockLast},
	"bzpopmin":   {class: block, block: blockLast},
	"bzpopmax":   {class: block, block: blockLast},
	"blmpop":     {class: block, block: blockFirst, keys: keysNumkeys, keyArg: 2},
	"bzmpop":     {class: block, block: blockFirst, keys: keysNumkeys, keyArg: 2},

	// Transactions: the client's pinned connection.
	"multi":   {class: pin, pin: "codec.PinMulti"},
	"exec":    {class: pin, pin: "codec.PinExec"},
	"discard": {class: pin, pin: "codec.PinDiscard"},
	"watch":   {class: pin, pin: "codec.PinWatch"},
	"unwatch": {class: pin, pin: "codec.PinUnwatch"},

	// Pub/sub: a channel lives on the server (slot) of its name, as a key
	// would; the subscriptions on connections of the client's own.
	"publish":      {class: key, keys: keysChannel},
	"spublish":     {class: key},
	"subscribe":    {class: sub, keys: keysAllArgs, sub: "codec.SubSubscribe"},
	"unsubscribe":  {class: sub, keys: keysAllArgs, sub: "codec.SubUnsubscribe"},
	"psubscribe":   {class: sub, keys: keysAllArgs, sub: "codec.SubPsubscribe"},
	"punsubscribe": {class: sub, keys: keysAllArgs, sub: "codec.SubPunsubscribe"},
	"ssubscribe":   {class: sub, sub: "codec.SubSsubscribe"},
	"sunsubscribe": {class: sub, sub: "codec.SubSunsubscribe"},

	// Containers, their carried subcommands, and why the others are not.
	"command":                 {class: container, bare: anyServer, subReason: rAdmin},
	"command|count":           {class: anyServer},
	"command|docs":            {class: anyServer},
	"command|info":            {class: anyServer},
	"command|list":            {class: anyServer},
	"command|getkeys":         {class: anyServer},
	"command|getkeysandflags": {class: anyServer},
	"client":                  {class: container, subReason: rConnection},
	"client|setname":          {class: local, local: "localClientSetname"},
	"client|getname":          {class: local, local: "localClientGetname"},
	"client|id":               {class: local, local: "localClientID"},
	"client|setinfo":          {class: local, local: "localClientSetinfo"},
	"client|list":             {class: local, local: "localClientList"},
	"client|info":             {class: local, local: "localClientInfo"},
	"client|kill":             {class: local, local: "localClientKill"},
	"client|no-evict":         {class: local, local: "localClientNoEvict"},
	"client|tracking":         {class: local, local: "localClientTracking"},
	"client|trackinginfo":     {class: local, local: "localClientTracking"},
	"client|caching":          {class: local, local: "localClientTracking"},
	"client|getredir":         {class: local, local: "localClientTracking"},
	"client|reply":            {class: local, local: "localClientReply"},
	"client|pause":            {class: all, serverConfig: true, reason: rAdmin},
	"client|unpause":          {class: all, serverConfig: true, reason: rAdmin},
	"object":                  {class: container, subReason: rAdmin},
	"object|encoding":         {class: key},
	"object|freq":             {class: key},
	"object|idletime":         {class: key},
	"object|refcount":         {class: key},
	"memory":                  {class: container, subReason: rAdmin},
	"memory|usage":            {class: key},
	"xinfo":                   {class: container, subReason: rAdmin},
	"xinfo|stream":            {class: key},
	"xinfo|groups":            {class: key},
	"xinfo|consumers":         {class: key},
	"xgroup":                  {class: container, subReason: rAdmin},
	"xgroup|create":           {class: key},
	"xgroup|setid":            {class: key},
	"xgroup|destroy":          {class: key},
	"xgroup|createconsumer":   {class: key},
	"xgroup|delconsumer":      {class: key},
	"script":                  {class: container, subReason: rAdmin},
	"script|load":             {class: all},
	"script|exists":           {class: all},
	"script|flush":            {class: all},
	"script|kill":             {class: all},
	"function":                {class: container, subReason: rFunctions},
	"function|load":           {class: all, every: true, reason: rEvery},
	"function|delete":         {class: all, every: true, reason: rEvery},
	"function|flush":          {class: all, every: true, reason: rEvery},
	"function|list":           {class: all, every: true, reason: rEvery},
	"function|dump":           {class: all, every: true, reason: rEvery},
	"function|restore":        {class: all, every: true, reason: rEvery},
	"function|kill":           {class: all},
	"function|stats":          {class: all},
	"cluster":                 {class: container, subReason: rCluster},
	"cluster|slots":           {class: local, local: "localClusterSlots", clusterView: true, reason: rCluster},
	"cluster|shards":          {class: local, local: "localClusterShards", clusterView: true, reason: rCluster},
	"cluster|nodes":           {class: local, local: "localClusterNodes", clusterView: true, reason: rCluster},
	"cluster|info":            {class: local, local: "localClusterInfo", clusterView: true, reason: rCluster},
	"cluster|myid":            {class: local, local: "localClusterMyID", clusterView: true, reason: rCluster},
	"cluster|keyslot":         {class: local, local: "localClusterKeyslot", clusterView: true, reason: rCluster},
	"pubsub":                  {class: container, subReason: rPubSub},
	"pubsub|channels":         {class: all},
	"pubsub|numsub":           {class: all},
	"pubsub|numpat":           {class: all},
	"pubsub|shardchannels":    {class: all},
	"pubsub|shardnumsub":      {class: all},
	"acl":                     {class: container, subReason: rAdmin},
	"config":                  {class: container, subReason: rAdmin},
	"config|get":              {class: all, serverConfig: true, reason: rAdmin},
	"config|set":              {class: all, serverConfig: true, reason: rAdmin},
	"config|resetstat":        {class: all, serverConfig: true, reason: rAdmin},
	"config|rewrite":          {class: all, serverConfig: true, reason: rAdmin},
	"latency":                 {class: container, subReason: rAdmin},
	"latency|latest":          {class: all},
	"latency|history":         {class: all},
	"latency|histogram":       {class: all},
	"latency|doctor":          {class: all},
	"latency|graph":           {class: all},
	"latency|reset":           {class: all, serverConfig: true, reason: rAdmin},
	"module":                  {class: container, subReason: rAdmin},
	// DEBUG by subcommand (the subcommands are extra entries below): about
	// a key, to its server; a server's setting or action, to every
	// server; a reply's shape, to any one. The rest is refused.
	"debug":                              {class: container, subReason: rAdmin},
	"debug|object":                       {class: key},
	"debug|sdslen":                       {class: key},
	"debug|listpack":                     {class: key},
	"debug|quicklist":                    {class: key},
	"debug|htstats-key":                  {class: key},
	"debug|digest-value":                 {class: same},
	"debug|digest":                       {class: all, txOne: true},
	"debug|sleep":                        {class: all, txOne: true},
	"debug|reload":                       {class: all, txOne: true},
	"debug|loadaof":                      {class: all, txOne: true},
	"debug|set-active-expire":            {class: all, txOne: true},
	"debug|quicklist-packed-threshold":   {class: all, txOne: true},
	"debug|pause-cron":                   {class: all, txOne: true},
	"debug|set-disable-deny-scripts":     {class: all, txOne: true},
	"debug|set-skip-checksum-validation": {class: all, txOne: true},
	"debug|aof-flush-sleep":              {class: all, txOne: true},
	"debug|replybuffer":                  {class: all, txOne: true},
	"debug|config-rewrite-force-all":     {class: all, txOne: true},
	"debug|log":                          {class: all, txOne: true},
	"debug|protocol":                     {class: anyServer},
	"debug|stringmatch-test":             {class: anyServer},
	"debug|structsize":                   {class: anyServer},
	"debug|htstats":                      {class: anyServer},
	"debug|error":                        {class: anyServer},
	"debug|segfault":                     {class: unsupported, reason: rCrash},
	"debug|panic":                        {class: unsupported, reason: rCrash},
	"debug|restart":                      {class: unsupported, reason: rCrash},
	"debug|crash-and-recover":            {class: unsupported, reason: rCrash},
	"debug|oom":                          {class: unsupported, reason: rCrash},
	"debug|assert":                       {class: unsupported, reason: rCrash},
	"debug|leak":                         {class: unsupported, reason: rCrash},
	"debug|populate":                     {class: unsupported, reason: rPopulate},
	"debug|mallctl":                      {class: unsupported, reason: rAdmin},
	"debug|mallctl-str":                  {class: unsupported, reason: rAdmin},
	"debug|change-repl-id":               {class: unsupported, reason: rAdmin},
	"debug|client-eviction":              {class: unsupported, reason: rAdmin},
	"debug|replicate":                    {class: unsupported, reason: rAdmin},
	"debug|drop-cluster-packet-filter":   {class: unsupported, reason: rCluster},
	"debug|clusterlink":                  {class: unsupported, reason: rCluster},
	"slowlog":                            {class: container, subReason: rAdmin},
	"slowlog|get":                        {class: local, local: "localSlowlogGet"}, // the pool's slowlog
	"slowlog|len":                        {class: local, local: "localSlowlogLen"},
	"slowlog|reset":                      {class: local, local: "localSlowlogReset"},
}

// extra are commands the reference redis-server lacks but clients send:
// go-redis v9 names itself with CLIENT SETINFO (Redis 7.2) on every new
// connection. Fields as COMMAND reports them. DEBUG's subcommands are no
// subcommands to COMMAND (debug.c reads argument 1 itself): they are
// listed here with the argument counts and key positions debug.c
// accepts, a minimum where it takes several.
var extra = []entry{
	{name: "client|setinfo", arity: 4, flags: []string{"noscript", "loading", "stale"}},
	{name: "debug|help", arity: 2},
	{name: "debug|object", arity: 3, first: 2, last: 2, step: 1},
	{name: "debug|sdslen", arity: 3, first: 2, last: 2, step: 1},
	{name: "debug|listpack", arity: 3, first: 2, last: 2, step: 1},
	{name: "debug|quicklist", arity: -3, first: 2, last: 2, step: 1},
	{name: "debug|htstats-key", arity: -3, first: 2, last: 2, step: 1},
	{name: "debug|digest-value", arity: -2, first: 2, last: -1, step: 1},
	{name: "debug|digest", arity: 2},
	{name: "debug|sleep", arity: 3},
	{name: "debug|reload", arity: -2},
	{name: "debug|loadaof", arity: 2},
	{name: "debug|set-active-expire", arity: 3},
	{name: "debug|quicklist-packed-threshold", arity: 3},
	{name: "debug|pause-cron", arity: 3},
	{name: "debug|set-disable-deny-scripts", arity: 3},
	{name: "debug|set-skip-checksum-validation", arity: 3},
	{name: "debug|aof-flush-sleep", arity: 3},
	{name: "debug|replybuffer", arity: 4},
	{name: "debug|config-rewrite-force-all", arity: 2},
	{name: "debug|log", arity: 3},
	{name: "debug|protocol", arity: 3},
	{name: "debug|stringmatch-test", arity: 2},
	{name: "debug|structsize", arity: 2},
	{name: "debug|htstats", arity: -3},
	{name: "debug|error", arity: 3},
	{name: "debug|segfault", arity: -2},
	{name: "debug|panic", arity: -2},
	{name: "debug|restart", arity: -2},
	{name: "debug|crash-and-recover", arity: -2},
	{name: "debug|oom", arity: -2},
	{name: "debug|assert", arity: -2},
	{name: "debug|leak", arity: -2},
	{name: "debug|populate", arity: -2},
	{name: "debug|mallctl", arity: -2},
	{name: "debug|mallctl-str", arity: -2},
	{name: "debug|change-repl-id", arity: -2},
	{name: "debug|client-eviction", arity: -2},
	{name: "debug|replicate", arity: -2},
	{name: "debug|drop-cluster-packet-filter", arity: -2},
	{name: "debug|clusterlink", arity: -2},
}
