package codec

import (
	"errors"
	"sort"
	"sync"
	"time"
)

// Route says how the proxy delivers a request.
type Route uint8

const (
	// RouteKey sends the request to the backend that owns Keys[0].
	RouteKey Route = iota
	// RouteMulti splits the request per backend owning its keys (Dialect.Split)
	// and merges the replies (Dialect.Merge).
	RouteMulti
	// RouteAll sends the request unchanged to every backend of the pool and
	// merges the replies (Dialect.Merge with no Split).
	RouteAll
	// RouteLocal is answered by the proxy itself (Dialect.AppendLocal).
	RouteLocal
	// RouteSame sends the request unchanged to the backend that owns all of
	// its Keys; if they live on different backends the proxy answers an
	// ErrCrossServer error (Redis MSETNX, SINTER, EVAL with keys, ...).
	RouteSame
	// RouteAny sends the request to any one backend: its answer does not
	// depend on the keys (Redis COMMAND).
	RouteAny
	// RouteWatch asks the proxy to stream the pool's event log to the
	// client from now on (memcached's watch command): Arg holds the
	// streams asked for (Watch*, possibly none). The proxy answers it
	// with Dialect.AppendLocal when the pool's router has such a log, and
	// then reads no more requests from that client.
	RouteWatch
	// RouteBlock may hold its server connection until data arrives (Redis
	// BLPOP, XREAD BLOCK): every key on one backend, sent on a connection
	// of the client's own for as long as Block says.
	RouteBlock
	// RoutePin starts, continues or ends a state the server keeps on the
	// connection (Redis WATCH, MULTI, EXEC, DISCARD, UNWATCH, WAIT): the
	// proxy serves it on a connection dedicated to the client; Pin says
	// which.
	RoutePin
	// RouteServer sends the request to the server it names itself:
	// number Target in the pool's own order of servers (Redis SCAN, whose
	// cursor carries the server). The router sets Servers to how many
	// servers it has before it sends the request, so that the dialect's
	// AppendReply (the request is ModeRewrite) can tell the client where
	// to go next; a Target the pool has no server for is answered with
	// the dialect's ErrClient error ErrNoTarget.
	RouteServer
	// RouteSubscribe subscribes or unsubscribes the client (Redis
	// SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBEs): Sub
	// says which, Keys are the channels or patterns it names. The proxy
	// serves it on server connections of the client's own, which carry
	// the messages back.
	RouteSubscribe
)

// Sub names a RouteSubscribe request.
type Sub uint8

const (
	SubNone         Sub = iota
	SubSubscribe        // SUBSCRIBE channel...: each on the server of its name
	SubUnsubscribe      // UNSUBSCRIBE [channel...]: none means every channel
	SubPsubscribe       // PSUBSCRIBE pattern...
	SubPunsubscribe     // PUNSUBSCRIBE [pattern...]
	SubSsubscribe       // SSUBSCRIBE shardchannel...: one server (slot) for all
	SubSunsubscribe     // SUNSUBSCRIBE [shardchannel...]
)

// Pin names a RoutePin request.
type Pin uint8

const (
	PinNone    Pin = iota
	PinWatch       // WATCH key...: keys on the pinned server
	PinUnwatch     // UNWATCH
	PinMulti       // MULTI
	PinExec        // EXEC
	PinDiscard     // DISCARD
	PinWait        // WAIT: replicas of the pinned server (Block is its timeout)
)

// Script marks the requests of a pool whose scripts run on dedicated
// connections (Options.DedicatedScripts) that the proxy treats apart.
type Script uint8

const (
	ScriptNone Script = iota
	ScriptRun         // EVAL, FCALL ...: a RouteBlock request that runs a script, not ordered among blocking commands
	ScriptPing        // PING, a RouteLocal request: sent to a server running a script instead, which answers -BUSY as Redis does
)

// Pause marks CLIENT PAUSE and CLIENT UNPAUSE, which go to every server:
// while a pause is on, the proxy sends its clients' commands on
// connections of their own, where the servers hold those the pause holds.
type Pause uint8

const (
	PauseNone Pause = iota
	PauseOn         // CLIENT PAUSE, for Request.Block
	PauseOff        // CLIENT UNPAUSE
)

// ErrNoTarget is the text of the error a router answers to a RouteServer
// request whose Target names no server of the pool (a cursor from a pool
// that had more servers, or a made-up one): Redis's own word for a bad
// SCAN cursor.
const ErrNoTarget = "invalid cursor"

// Streams of a pool's event log a RouteWatch request may ask for, as bits
// of its Arg (memcached's watch names).
const (
	// WatchProxyReqs is "proxyreqs": requests a route file logs.
	WatchProxyReqs = 1 << iota
	// WatchProxyEvents is "proxyevents": route errors and backend failures.
	WatchProxyEvents
	// WatchProxyUser is "proxyuser": a route file's own log lines.
	WatchProxyUser
	// WatchDeletions is "deletions": items a delete or md command deletes
	// from the proxy's own cache.
	WatchDeletions
)

// Mode says which replies the client expects for a request.
type Mode uint8

const (
	// ModeNormal: the client reads one reply.
	ModeNormal Mode = iota
	// ModeNoreply: the client reads nothing, whatever happens (memcached noreply).
	ModeNoreply
	// ModeQuiet: the dialect decides per reply what the client sees
	// (memcached meta "q": misses and successes are hidden, errors shown).
	ModeQuiet
	// ModeRewrite: the client reads one reply, but the backend was sent
	// another form of the request and the dialect rewrites its reply
	// (memcached get sent as mg): AppendReply never passes it through.
	ModeRewrite
)

// Part says whether a request is a piece of a longer client request that
// the parser cut as it streamed in (see PartParser).
type Part uint8

const (
	// PartWhole: the request is the client's whole request.
	PartWhole Part = iota
	// PartMore: a piece that more pieces follow. The client sees its
	// reply without the request's terminator (PartReplier.TrimPart).
	PartMore
	// PartLast: the last piece; the client sees its reply as it is.
	PartLast
)

// ReplyKind classifies a backend reply.
type ReplyKind uint8

const (
	// ReplyOK is a successful reply: a hit, stored, deleted, a number, ...
	ReplyOK ReplyKind = iota
	// ReplyMiss is a successful "not found" reply.
	ReplyMiss
	// ReplyError is an error the server reported for this request alone; the
	// connection stays in sync and the server counts as healthy.
	ReplyError
	// ReplyFailure is a reply that says the server itself is unhealthy (Redis
	// -LOADING): delivered to the client, counted as a backend failure.
	ReplyFailure
	// ReplyFatal is an error reply that shows the server misread the stream
	// (memcached "ERROR": it did not understand what the proxy sent). It is
	// delivered to its request; then the socket is dropped and every request
	// behind it fails, as after a desync.
	ReplyFatal
)

// ErrorKind selects the protocol's wording of an error reply.
type ErrorKind uint8

const (
	// ErrClient is the client's fault (memcache CLIENT_ERROR, RESP -ERR).
	ErrClient ErrorKind = iota
	// ErrServer is the proxy's or a backend's fault (memcache SERVER_ERROR, RESP -ERR).
	ErrServer
	// ErrUnknownCommand is an unknown or unsupported command (memcache ERROR).
	ErrUnknownCommand
	// ErrCrossServer is a RouteSame request whose keys live on different
	// backends (RESP -CROSSSLOT).
	ErrCrossServer
)

// Request is one parsed client request.
type Request struct {
	// Name is the lower-case command name ("get", "ms", "mget").
	Name string
	// Cmd is the dialect's own command number; only the dialect reads it.
	Cmd int
	// Route says how the proxy delivers the request.
	Route Route
	// Mode says which replies the client expects.
	Mode Mode
	// Keys are the routing keys in the client's order (decoded, e.g. from
	// base64), slices of Buf.
	Keys [][]byte
	// Wire is what is sent to a backend: the request as the client sent it,
	// possibly rewritten by the dialect (e.g. noreply removed). A slice of Buf.
	Wire []byte
	// Close asks the proxy to close the client connection after the replies to
	// this and all earlier requests are written (memcache quit).
	Close bool
	// Arg is dialect-private: a number the parser keeps for Split, Merge or
	// AppendReply.
	Arg int
	// Part says whether the request is a piece of a longer one (PartMore,
	// PartLast) or whole (PartWhole); see PartParser.
	Part Part
	// Target is, for a RouteServer request, the number of the server it
	// names, in the pool's order of servers; the parser sets it.
	Target int
	// Servers is, for a RouteServer request, how many servers the pool
	// that routes it walks; the router sets it before it sends the
	// request.
	Servers int
	// WithLocal asks the proxy to let the dialect add its own part of the
	// answer (LocalAdder.AddLocal) before it routes the request to the
	// servers; the dialect's Merge puts it beside the servers' replies
	// (Redis INFO: the "# Proxy" section after the servers' sections).
	WithLocal bool
	// ClusterView is set by the parser of a pool that answers as a Redis
	// Cluster (Options.ClusterView), for the merges that say so (Redis
	// INFO's cluster_enabled).
	ClusterView bool
	// Buf is the storage that Keys and Wire point into; reused by Reset.
	Buf []byte
	// Pin says what a RoutePin request does.
	Pin Pin
	// Proto is the version of the protocol the client speaks when the
	// dialect has more than one (RESP: 3 after the client's HELLO 3; 0
	// means the dialect's first, RESP2). The parser sets it on every
	// request; a backend writes the request on sockets whose handshake
	// asked the server for the same version, so that the reply comes in
	// it, and a request the proxy makes from it (a split, a redirect)
	// keeps it.
	Proto uint8
	// Block is how long a RouteBlock request (or PinWait) may hold its
	// server connection by its own timeout argument; 0 means until data
	// arrives, negative that the argument is no valid timeout (the
	// server answers at once with an error).
	Block time.Duration
	// Sub says what a RouteSubscribe request does.
	Sub Sub
	// Script marks a script and a PING under DedicatedScripts.
	Script Script
	// Pause marks CLIENT PAUSE (its timeout in Block) and UNPAUSE.
	Pause Pause
	// TxOne marks a RouteAll request that a transaction runs on its own
	// server, queued there as a keyless command is (Redis DEBUG SLEEP
	// inside MULTI), where the proxy refuses other RouteAll requests
	// inside a transaction.
	TxOne bool
}

// Reset clears r for reuse, keeping its storage.
func (r *Request) Reset() {
	keys, buf := r.Keys[:0], r.Buf[:0]
	*r = Request{Keys: keys, Buf: buf}
}

// Reply is what a backend answered to one request.
type Reply struct {
	// Raw is the reply's wire bytes, owned by the Reply. Empty when Err is set.
	Raw []byte
	// Kind classifies Raw.
	Kind ReplyKind
	// Err is set when there is no reply: the backend failed, timed out or was
	// unreachable. Its text names the cause and goes to the client.
	Err error
	// Server names the server that answered (or failed to), for a merge
	// that reports per server (Redis INFO); set on the replies a fan-out
	// hands to Merge, empty elsewhere.
	Server string
}

// Options configure a client session's parser: what a client may send and
// what it must do first.
type Options struct {
	// MaxKey is the longest key in bytes. Zero means the dialect's default.
	MaxKey int
	// MaxLine is the longest request line (or inline command) in bytes. Zero
	// means the dialect's default.
	MaxLine int
	// MaxValue is the largest value (or bulk string) in bytes. Zero means the
	// dialect's default.
	MaxValue int
	// Deny lists command names (lower case) the pool forbids; the parser
	// answers them with an error naming the command.
	Deny []string
	// Password, when set, must be presented by the client (Redis AUTH)
	// before the parser lets any other request through.
	Password string
	// Username goes with Password where the protocol has users ("" means
	// the protocol's default user).
	Username string
	// DB is the database the pool serves (Redis SELECT); clients may select
	// only this one.
	DB int
	// MetaGets asks the memcache parser to send a one-key get or gets to
	// the backend as a meta get (mg), in ModeRewrite. memcached sends the
	// reply to every get at once, but holds meta replies until it has read
	// all the requests at hand: behind a proxy that pipelines many
	// clients' requests on one socket, that is one send per batch.
	MetaGets bool
	// ProxyErrors asks the memcache parser for the words of memcached's
	// built-in proxy instead of memcached's own: "CLIENT_ERROR parsing
	// request" for a malformed request of a command the proxy knows, the
	// connection closed without a word for any other command, "CLIENT_ERROR
	// bad data chunk" after which the stream goes on; a multi-key get
	// whose first key starts past its line's 20th byte is "CLIENT_ERROR
	// malformed request", and one with keys longer than MaxKey is
	// accepted: its router must answer each such key "CLIENT_ERROR key
	// too long" in its place. The pool's kind sets it (Lua pools); the
	// RESP parser ignores it.
	ProxyErrors bool
	// ProxyWire asks the memcache parser to send quiet and noreply
	// requests as memcached's built-in proxy does: a meta request's "q"
	// flag overwritten by a space (no "mn" follows), a storage, incr,
	// decr or touch request's "noreply" as "noreplY", so that the
	// backend answers and the proxy hides the answer as the client
	// asked. The pool's kind sets it (Lua pools); the RESP parser ignores
	// it.
	ProxyWire bool
	// ProxyV1 asks, with ProxyErrors, for the words of memcached 1.6.22's
	// proxy where they differ from 1.6.45's: a multi-key retrieval whose
	// first key starts too far in is answered "CLIENT_ERROR malformed
	// request" once for each key, then "END" (1.6.45 answers it once).
	// The Lua pool kind sets it for a route file of the V1 API (see
	// lua.Router.V1); the RESP parser ignores it.
	ProxyV1 bool
	// ServerInfo asks the RESP parser to send INFO to every server of the
	// pool (RouteAll, WithLocal) so that Merge answers the servers'
	// sections merged, with the proxy's own; without it INFO is answered
	// by the proxy alone (RouteLocal). "INFO proxy" is always the proxy's
	// alone. The pool's kind sets it (sharded and Redis Cluster pools);
	// the memcache parser ignores it.
	ServerInfo bool
	// Keyspace asks the RESP parser to carry the commands that span every
	// server's keys (SCAN as RouteServer; KEYS, DBSIZE, RANDOMKEY,
	// FLUSHALL and FUNCTION's LOAD, DELETE, FLUSH and LIST as RouteAll);
	// without it they are refused with an error naming the command. The
	// pool's kind sets it (sharded and Redis Cluster pools); the memcache
	// parser ignores it.
	Keyspace bool
	// RESP2Only refuses "HELLO 3" with -NOPROTO, so clients stay on
	// RESP2 as with a Redis 5 server; without it HELLO 3 switches a
	// session to RESP3 (requests then carry Request.Proto 3). The pool's
	// kind sets it (Lua pools, whose routes build requests and read
	// replies in RESP2); the memcache parser ignores it.
	RESP2Only bool
	// ServerConfig asks the RESP parser to carry CONFIG GET, SET,
	// RESETSTAT and REWRITE to every server (RouteAll); CONFIG SET of a
	// setting the proxy depends on (requirepass, port, tls-*, ...) is
	// still refused. Without it they are refused as commands that
	// administer a single server. The pool's kind sets it from the
	// pool's redis_config key (sharded and Redis Cluster pools); the
	// memcache parser ignores it.
	ServerConfig bool
	// ClusterView asks the RESP parser to answer CLUSTER SLOTS, SHARDS,
	// NODES, INFO, MYID and KEYSLOT (from the Env: ClusterEnv), READONLY,
	// READWRITE and ASKING itself, so that cluster-aware clients take
	// the pool's proxies for a Redis Cluster. The pool's kind sets it from
	// the pool's redis_cluster_view key; without it they are refused.
	ClusterView bool
	// DedicatedScripts asks the RESP parser to route EVAL, EVALSHA and
	// FCALL (and their _RO forms) as RouteBlock requests that wait as
	// long as the script runs, so that each runs on a connection of its
	// own, and to mark them and PING (Request.Script). The pool's kind
	// sets it from the pool's redis_scripts key.
	DedicatedScripts bool
}

// HandshakeOptions describe what a new backend socket must be told.
type HandshakeOptions struct {
	// Password, when set, authenticates the proxy to the backend.
	Password string
	// Username goes with Password where the protocol has users.
	Username string
	// DB, when non-zero, selects a database.
	DB int
	// Meta asks a memcache backend to prove it speaks the meta protocol
	// (mn) before it is used: the pool sends it meta requests.
	Meta bool
	// Proto, when not 0, is the version of the protocol the socket must
	// speak (RESP: 3 asks the server for RESP3 with HELLO 3). 0 is the
	// dialect's first.
	Proto uint8
	// MetaProbe asks a memcache backend whether it speaks the meta
	// protocol (mn) without requiring it: the dialect puts the probe last
	// among its handshake requests, and a reply other than ReplyOK to it
	// (memcached before 1.6 answers "ERROR") leaves the socket usable, as
	// one that speaks only text. Meta, when also set, wins.
	MetaProbe bool
}

// Env is what the proxy tells a dialect answering a local command.
type Env interface {
	// Version is the proxy's version string.
	Version() string
	// Stats lists the proxy's counters as name/value pairs, in order.
	Stats() []Stat
}

// SectionEnv is implemented by an Env that also has named groups of
// counters: memcached's "stats proxy", Redis's "INFO proxy". Dialects
// type-assert for it. A pool's router may implement it too (a Lua
// pool's "proxyfuncs", "items", "slabs"), and then its Section("") gives
// the lines it adds to a plain "stats" (proxy_req_active).
type SectionEnv interface {
	// Section returns the counters of the named group, and false when there
	// is no such group.
	Section(name string) ([]Stat, bool)
}

// LocalAdder is implemented by a dialect with requests that carry a part
// of the proxy's own to their merge (Request.WithLocal). The session calls
// AddLocal on its reader goroutine before routing such a request.
type LocalAdder interface {
	// AddLocal stores in req (after its Wire, in Buf) what the proxy adds
	// to the answer, given env; Merge finds it there.
	AddLocal(req *Request, env Env)
}

// ClientsEnv is implemented by the Env a session passes with a local
// command: it knows the client connections of the session's pool, which
// Redis's CLIENT LIST, CLIENT INFO and CLIENT KILL show and end (the
// proxy's clients, not a server's). Dialects type-assert for it.
type ClientsEnv interface {
	// Clients returns the pool's client connections, the asking one
	// among them (Client.Self).
	Clients() []Client
}

// Client is one client connection of a pool (ClientsEnv).
type Client struct {
	// Parser is the connection's: its dialect reads what the client set
	// (an id, a name, a protocol) from it, through means of its own that
	// are safe on any goroutine.
	Parser      RequestParser
	Addr, LAddr string // the client's address and the listener's
	FD          int    // the socket's descriptor; -1: none
	Age, Idle   time.Duration
	Cmd         int  // the Request.Cmd of the last request read
	Multi       bool // inside a transaction (after MULTI)
	Queued      int  // the commands queued since MULTI
	Subscribed  bool // holds subscriptions
	Self        bool // the connection asking
	Unix        bool // a unix socket's client
	// Subs are the channels, patterns and shard channels it subscribed
	// to.
	Subs [3]int
	// Blocked: a blocking command of its waits for data.
	Blocked bool
	// Tracking, with TrackBcast and TrackBroken (the client redirected
	// to has gone), and Redirect (the client id invalidations go to; 0:
	// its own connection): its client-side caching.
	Tracking, TrackBcast, TrackBroken bool
	Redirect                          int64
	// InBuf is what the proxy holds of the client's input: the bytes
	// read and not yet parsed, and for the asking client, its request
	// and what follows it; InFree the room left in that buffer (the
	// asking client's).
	InBuf, InFree int
	// OutHeld is the reply bytes received for it and not yet written;
	// OutWait that its socket takes no more now (a write waits).
	OutHeld int64
	OutWait bool
	// Kill ends the connection once the requests it has sent are
	// answered, as the server ends a killed client.
	Kill func()
}

// ClusterEnv is implemented by the Env a session passes with a local
// command of a pool with Options.ClusterView: the proxies that serve the
// pool, shown to cluster-aware clients as a Redis Cluster's masters.
type ClusterEnv interface {
	// ClusterNodes returns the pool's proxies in the order of their
	// slots, the asking one marked Self.
	ClusterNodes() []ClusterNode
	// ClusterSlot returns key's hash slot, as Redis Cluster computes it.
	ClusterSlot(key []byte) int
}

// ClusterAwarer is implemented by a RequestParser whose client may have
// asked for the cluster's map (a Redis client's CLUSTER SLOTS, SHARDS or
// NODES): such a client follows MOVED.
type ClusterAwarer interface {
	ClusterAware() bool
}

// ClusterNode is one proxy of a pool shown as a Redis Cluster master.
type ClusterNode struct {
	ID    string   // 40 hexadecimal characters
	Addr  string   // host:port, where clients reach its pool
	Slots [][2]int // the slot ranges it serves, first and last
	Self  bool     // the proxy asked
}

// SlowEntry is one request of a pool's slowlog, as a dialect shows it
// (Redis's SLOWLOG GET, memcache's "stats slowlog").
type SlowEntry struct {
	ID      int64         // numbers entries over the slowlog's life
	Time    time.Time     // when the request was read
	Took    time.Duration // from read to its reply handed to the client
	Command string        // the request's name
	Key     []byte        // its first key, cut; nil for none
	Wire    []byte        // the request as the client sent it, cut
	Client  string        // the client's address
	Name    string        // the client's name (Redis's CLIENT SETNAME), "" for none
	Backend string        // the server of its slowest backend call, "" for none
	// Where the time went: in the proxy before the request was queued,
	// queued for the server's socket, at the server, in the proxy after.
	In, Queued, Server, Out time.Duration
}

// SlowlogEnv is implemented by an Env with a slowlog (every pool of the
// proxy). Dialects type-assert for it.
type SlowlogEnv interface {
	// Slowlog returns up to n entries, newest first (n < 0: all).
	Slowlog(n int) []SlowEntry
	// SlowlogLen returns how many entries the slowlog holds.
	SlowlogLen() int
	// SlowlogReset empties the slowlog.
	SlowlogReset()
	// SlowlogSettings returns the threshold from which a request is kept
	// (negative: none is) and how many entries it keeps.
	SlowlogSettings() (threshold time.Duration, maxLen int)
	// SetSlowlogThreshold sets the threshold: negative keeps no request,
	// 0 every request.
	SetSlowlogThreshold(threshold time.Duration)
	// SetSlowlogMaxLen sets how many entries the slowlog keeps, the
	// oldest past it dropped at once.
	SetSlowlogMaxLen(maxLen int)
}

// Redactor is implemented by a dialect with requests whose arguments a
// slowlog must not keep as they are (Redis: a password). The proxy asks
// it for each request its slowlog keeps.
type Redactor interface {
	// Redact returns wire, a request as the client sent it and possibly
	// cut short, as a slowlog keeps it: wire itself when it carries no
	// secret, else a copy appended to dst with each secret argument
	// replaced (Redis's "(redacted)").
	Redact(dst, wire []byte) []byte
}

// ClientNamer is implemented by a RequestParser whose client may name
// itself (Redis's CLIENT SETNAME). It is safe on any goroutine.
type ClientNamer interface {
	// ClientName returns the client's name, "" for none.
	ClientName() string
}

// VersionEnv is implemented by an Env that knows the version of the
// servers behind the pool: memcache's "version" answers it (clients read
// it to decide which of the server's features to use), while
// Env.Version stays the proxy's own. Dialects type-assert for it.
type VersionEnv interface {
	// ServerVersion returns the version to announce as the servers'.
	ServerVersion() string
}

// ResetEnv is implemented by an Env whose counters a client may reset
// (memcached's "stats reset"). Dialects type-assert for it.
type ResetEnv interface {
	// ResetStats starts the resettable counters Stats shows from zero.
	ResetStats()
}

// BusyReader is implemented by a dialect whose servers answer a busy
// reply while they run something long (Redis: -BUSY during a script):
// such a server is up, and a new socket's validation request (the last
// of its handshake) answered so is good.
type BusyReader interface {
	// Busy reports whether reply, framed, is the busy reply.
	Busy(reply []byte) bool
}

// VersionReader is implemented by a dialect whose handshake learns the
// server's version (memcache: the "VERSION ..." reply).
type VersionReader interface {
	// ReadVersion returns the server version in reply, the framed ReplyOK
	// reply to the handshake request req, and false when req is no
	// version request.
	ReadVersion(req *Request, reply []byte) (string, bool)
}

// Stat is one named counter.
type Stat struct {
	Name  string
	Value string
}

// RequestParser frames client requests. It belongs to one client session.
type RequestParser interface {
	// ParseRequest parses the first request in buf into req (which the caller
	// has Reset). It returns how many bytes of buf the request used. When buf
	// holds only a prefix of a request it returns ErrIncomplete. On bad input it
	// returns a *ProtocolError.
	ParseRequest(buf []byte, req *Request) (n int, err error)
}

// StateUndoer is implemented by a RequestParser whose requests change the
// client's connection state as they are parsed (Redis: AUTH, HELLO,
// CLIENT SETNAME). The session calls UndoState when it refuses, after
// parsing it, the request ParseRequest returned last (a Redis client in
// subscribed mode may send neither), so that a refused request changes
// nothing, as on the server.
type StateUndoer interface {
	UndoState()
}

// StateSaver is implemented by a RequestParser that keeps its client's
// connection state (Redis: AUTH, the HELLO protocol, CLIENT SETNAME), so
// that the state can move with the connection to another process: an
// upgrade in place hands its idle client connections to the new process
// (proxy.Server.SetHandOff, Adopt). AppendState appends the state at a
// request boundary; RestoreState sets it in a new parser of the same
// dialect, and refuses bytes it cannot read. A client authenticated under
// other credentials than the new parser's is restored unauthenticated, as
// a reload that changes them leaves its clients.
type StateSaver interface {
	AppendState(dst []byte) []byte
	RestoreState(b []byte) error
}

// PartParser is implemented by a RequestParser that cuts a request too
// long to buffer whole (a memcache multi-get line of any length) into
// parts as it streams in: each part is a request of its own (Part set),
// routed, answered and written in order, so that the proxy's memory for
// the request is bounded by its read buffer and the replies it holds,
// not by the request's length.
//
// While InPart is true the parser's next request is the next part of the
// request it is cutting: a caller must keep feeding it the bytes that
// follow (and must not replace the parser).
type PartParser interface {
	RequestParser
	// ParsePart is called after ParseRequest reported ErrIncomplete. It
	// returns the next part of a long request at buf's start as
	// ParseRequest returns a request, or ErrIncomplete when buf does not
	// hold enough of it to cut one. ParseRequest cuts a part itself only
	// when the request's end is in buf: a caller that wants to hold the
	// rest of a request back (its client has too many replies waiting)
	// calls ParsePart only once it must make room in its buffer. Where
	// parts are cut depends on the bytes only, never on how they were
	// split into reads.
	ParsePart(buf []byte, req *Request) (n int, err error)
	// InPart reports whether the parser is inside a request it has begun
	// to cut into parts.
	InPart() bool
}

// LookupCounter is implemented by a dialect whose servers count their
// lookups and hits (memcached's cmd_get, get_hits, get_misses, cmd_set):
// the proxy counts its clients' the same way, from what they are sent.
type LookupCounter interface {
	// Lookups returns how many keys req looks up (0: none) and whether it
	// is a storage request.
	Lookups(req *Request) (keys int, store bool)
	// Hits returns how many of req's keys reply, the bytes its client is
	// sent (or their start: the head of a big reply), found.
	Hits(req *Request, reply []byte) int
}

// PartReplier is implemented by a dialect whose parser is a PartParser.
type PartReplier interface {
	// TrimPart returns how many bytes of reply, the client's reply to a
	// PartMore request as if it were whole, the client sees (the reply
	// without its terminator), and whether the reply ends the client's
	// request early (an error): the client then sees nothing of the
	// request's later parts.
	TrimPart(reply []byte) (n int, ended bool)
}

// Dialect is one wire protocol.
type Dialect interface {
	// Name is the registry name ("memcache", "redis").
	Name() string
	// NewRequestParser returns a parser for one client session.
	NewRequestParser(o Options) RequestParser
	// ParseReply frames the backend's reply to req at the start of buf and
	// returns its length and kind. ErrIncomplete means more bytes are needed;
	// any other error means the stream cannot be trusted any more (the backend
	// socket is closed).
	ParseReply(buf []byte, req *Request) (n int, kind ReplyKind, err error)
	// ResumeReply is ParseReply for a reply that arrives in pieces. buf
	// starts at the reply's first byte, as for ParseReply, and st says how
	// far earlier calls framed it (the zero ReplyState: not at all). On
	// ErrIncomplete st records the progress, so that the next call, given
	// the same bytes and more, examines no byte twice; on any other result
	// st is zeroed, ready for the next reply. A caller that drops buf's
	// bytes or changes req must zero st itself.
	ResumeReply(buf []byte, req *Request, st *ReplyState) (n int, kind ReplyKind, err error)
	// AppendReply appends to dst what the client sees of reply (the result of
	// ParseReply to req): usually reply itself; nothing for a noreply request.
	// For a ModeNormal request it must be reply itself: the proxy writes big
	// ones without calling it.
	AppendReply(dst []byte, req *Request, reply []byte, kind ReplyKind) []byte
	// AppendError appends an error reply in the protocol's wording.
	AppendError(dst []byte, kind ErrorKind, msg string) []byte
	// AppendLocal appends the proxy's own answer to a RouteLocal request.
	AppendLocal(dst []byte, req *Request, env Env) []byte
	// Split divides a RouteMulti request by backend. targets[i] is the backend
	// of req.Keys[i]. It returns one sub-request per distinct backend, in order
	// of first appearance, and that backend in subTargets; owners[i] is the
	// index in subs of the sub-request that carries req.Keys[i]. With a
	// scratch, the results live in its storage (see SplitScratch); with nil,
	// in fresh storage.
	Split(req *Request, targets []int, scratch *SplitScratch) (subs []*Request, subTargets, owners []int)
	// Merge appends the client's reply to a split (or RouteAll) request, given
	// the sub-requests, the owners Split returned with them, and their
	// replies in the same order as subs. For RouteAll, subs holds req once
	// per backend and owners is nil.
	Merge(dst []byte, req *Request, subs []*Request, owners []int, replies []Reply) []byte
	// Handshake returns the requests a new backend socket sends before it is
	// used; each must get a ReplyOK reply or the socket is dropped.
	Handshake(o HandshakeOptions) []*Request
}

// ReplyState is where the framing of an unfinished reply stopped (see
// Dialect.ResumeReply). Its fields are the dialect's to interpret; a
// caller only keeps one per reply being read and zeroes it between
// replies. The zero value starts at the reply's first byte.
type ReplyState struct {
	// Off is how many bytes of the reply are framed: the next call starts
	// examining there.
	Off int
	// Left and Index are the dialect's counters. RESP: Left is the
	// elements still to frame (the one at Off included), Index how many
	// bytes of that element's line are known to hold no "\n" (a long
	// simple string or error cut short). memcache: Index is the next key
	// of a multi-get to match.
	Left  int64
	Index int
}

// Joiner is implemented by a dialect whose server sends the reply to some
// requests the moment it has it, one send per request however many a
// batch holds, but answers one request naming several keys with one send:
// memcached's text get. A backend socket joins a run of such requests in
// one batch into one request, and frames the joined reply back into the
// replies each would have had alone.
type Joiner interface {
	// JoinClass returns req's class: requests of one nonzero class may be
	// joined (and their keys, req.Keys[0], are what is joined). 0: req
	// is never joined.
	JoinClass(req *Request) int
	// AppendJoined appends to dst the one request that asks, in order,
	// for the keys of reqs, all of one class and two or more.
	AppendJoined(dst []byte, reqs []*Request) []byte
	// ParseJoined frames, at buf's start, the part of a joined reply that
	// answers run[0], a joined request other than the last (whose part
	// ends the joined reply and is framed by ResumeReply as its own);
	// run[1:] are the requests joined after it, the last included. It
	// returns how many bytes of buf the part takes, n, and run[0]'s own
	// reply: buf[:raw] followed by tail. A part may take no bytes (n ==
	// 0: a miss, or an error that ends the joined reply and so answers
	// every request left in it). Errors are as ResumeReply's.
	ParseJoined(buf []byte, run []*Request) (n, raw int, tail string, kind ReplyKind, err error)
}

// BigReplier is implemented by a dialect that rewrites replies
// (ModeRewrite), so that the proxy can write a big one without copying its
// data, as it does a ModeNormal reply.
type BigReplier interface {
	// AppendReplyHead appends to dst what the client sees of reply (the
	// result of ParseReply to a ModeRewrite req) up to its data, and
	// returns the data, a slice of reply, and what the client sees after
	// it. The three together are what AppendReply appends.
	AppendReplyHead(dst []byte, req *Request, reply []byte, kind ReplyKind) (head, data []byte, tail string)
}

// Splicer is implemented by a dialect whose replies can carry a long
// value the proxy passes through without reading it into memory (the
// backend splices it from the server's socket to the client's).
type Splicer interface {
	// SpliceSpan reads the start of the reply to req at buf's start.
	// When the reply is one value block whose header line buf holds, it
	// returns the offset of the value's first byte, the value's length,
	// and the exact bytes the reply ends with after the value; the reply
	// is then those three parts and nothing else, as ParseReply would
	// frame it. Any other reply, or a header cut short, is not ok.
	SpliceSpan(buf []byte, req *Request) (data, size int, trailer string, ok bool)
}

// SplitScratch is storage a Split reuses for its sub-requests, their
// bytes and keys, and the target list: a 100-key multi-get split in fresh
// storage made half the proxy's garbage. The caller keeps one per request
// in flight and passes it to the next Split only once nothing uses the
// previous split's results any more.
type SplitScratch struct {
	Bytes   []byte
	Keys    [][]byte
	Reqs    []Request
	Subs    []*Request
	Targets []int
	Owners  []int
}

// Grow returns the scratch's storage emptied, with room for n sub-requests
// carrying keys keys and size bytes in all; a nil scratch returns fresh
// storage. Reqs is zeroed.
func (sc *SplitScratch) Grow(n, keys, size int) (buf []byte, keyArr [][]byte, reqs []Request, subs []*Request) {
	if sc == nil {
		return make([]byte, 0, size), make([][]byte, 0, keys), make([]Request, n), make([]*Request, n)
	}
	if cap(sc.Bytes) < size {
		sc.Bytes = make([]byte, 0, size)
	}
	if cap(sc.Keys) < keys {
		sc.Keys = make([][]byte, 0, keys)
	}
	if cap(sc.Reqs) < n {
		sc.Reqs = make([]Request, n)
		sc.Subs = make([]*Request, n)
	}
	reqs = sc.Reqs[:n]
	clear(reqs)
	return sc.Bytes[:0], sc.Keys[:0], reqs, sc.Subs[:n]
}

// TargetList returns the scratch's target list emptied (nil without a
// scratch).
func (sc *SplitScratch) TargetList() []int {
	if sc == nil {
		return nil
	}
	return sc.Targets[:0]
}

// OwnerList returns the scratch's owner list emptied, with room for n
// entries (fresh storage without a scratch). The scratch keeps the storage:
// a Split appending at most n owners needs not store the list back.
func (sc *SplitScratch) OwnerList(n int) []int {
	if sc == nil {
		return make([]int, 0, n)
	}
	if cap(sc.Owners) < n {
		sc.Owners = make([]int, 0, n)
	}
	return sc.Owners[:0]
}

// Keep stores a target list grown by append, for the next Split.
func (sc *SplitScratch) Keep(targets []int) {
	if sc != nil {
		sc.Targets = targets[:0]
	}
}

// Trim drops storage grown past max bytes (a key entry is a 24-byte
// slice header), so that one huge request does not pin its storage for
// the next ones. Nothing else needs clearing: what the storage points to
// is the split request's name or the scratch itself.
func (sc *SplitScratch) Trim(max int) {
	const keyEntry = 24
	if cap(sc.Bytes) > max || keyEntry*cap(sc.Keys) > max || 8*cap(sc.Owners) > max {
		*sc = SplitScratch{}
	}
}

// ErrIncomplete reports that the input holds only part of a frame.
var ErrIncomplete = errors.New("codec: incomplete frame")

// HintAbove is the frame length from which parsers report, with
// Incomplete, how long an unfinished frame is: a reader then grows its
// buffer once, to that length, rather than by doubling and copying.
const HintAbove = 16 << 10

// Incomplete returns an error that matches ErrIncomplete (errors.Is) and
// says the frame needs at least need bytes from its start. Parsers return
// it for frames longer than HintAbove whose header announced their length,
// and plain ErrIncomplete otherwise (it allocates; the plain one does not).
func Incomplete(need int) error { return IncompleteFrom(0, need) }

// IncompleteFrom is Incomplete for a frame cut short in a piece (a bulk
// string, a VALUE block) that starts at start: it announces need only
// when that piece is longer than HintAbove by itself, a big value on its
// way that the reader may make room for at once. A short piece in a long
// frame (an array, a multi-get) announces nothing: a length a few bytes
// past the buffer would not help the reader size it.
func IncompleteFrom(start, need int) error {
	if need-start <= HintAbove {
		return ErrIncomplete
	}
	return &incomplete{need}
}

// Needed returns the length an Incomplete error announced, or 0.
func Needed(err error) int {
	if e, ok := err.(*incomplete); ok {
		return e.need
	}
	return 0
}

type incomplete struct{ need int }

func (*incomplete) Error() string        { return ErrIncomplete.Error() }
func (*incomplete) Is(target error) bool { return target == ErrIncomplete }

// ProtocolError is a client request the dialect rejects.
type ProtocolError struct {
	// Reply is the exact bytes to send the client.
	Reply string
	// Close asks the proxy to close the connection after Reply: the stream
	// cannot be resynchronised.
	Close bool
	// Discard is how many bytes after the parsed length the proxy must read
	// and drop (a value too large to buffer, swallowed as memcached does).
	Discard int64
	// N is how many bytes of input the rejected request used.
	N int
	// Forward, when set, says the rejected request still has business
	// with a server: the parser filled in the request it was given with
	// what to send (memcache: drop the old value of a key whose new value
	// is too large, as memcached does), and the proxy routes it as any
	// other request; the client sees the dialect's AppendReply of its
	// reply, and Reply is unused. N and Discard keep their meaning; Close
	// must be false.
	Forward bool
}

func (e *ProtocolError) Error() string { return "codec: protocol error: " + e.Reply }

var (
	registryMu sync.RWMutex
	registry   = map[string]Dialect{}
)

// Register makes a dialect available by its name. It panics on a duplicate
// name: registration happens in init functions.
func Register(d Dialect) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[d.Name()]; dup {
		panic("codec: dialect registered twice: " + d.Name())
	}
	registry[d.Name()] = d
}

// Lookup returns the dialect registered under name.
func Lookup(name string) (Dialect, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	d, ok := registry[name]
	return d, ok
}

// Names lists the registered dialects, sorted.
func Names() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
