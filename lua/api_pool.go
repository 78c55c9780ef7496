package lua

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/memcache"
	"shardproxy/sharding"
)

// tunables are a backend's settings (memcached's struct proxy_tunables).
type tunables struct {
	connect      time.Duration
	retry        time.Duration
	read         time.Duration
	failureLimit int
	keepalive    bool
	conns        int
	depthLimit   int // requests a backend may have queued and in flight; 0 = no limit
}

// beSpec is what mcp.backend returns: a description of a backend, which
// becomes a connection when a pool uses it.
type beSpec struct {
	label  string
	host   string
	port   string
	tun    tunables
	down   bool   // start failing fast, as memcached's "down" option
	weight int    // for the twemproxy distributions; default 1
	log    *beLog // the "log" option: requests to log (v2_belog.go)
}

// addr is the backend's dial address: host:port, or host alone when it
// is a unix socket path.
func (s *beSpec) addr() string {
	if len(s.host) > 0 && s.host[0] == '/' {
		return s.host
	}
	return net.JoinHostPort(s.host, s.port)
}

// name is the backend's label, or its address when the label is empty
// (memcached accepts an empty label): the name in shardproxy's logs and
// stats, and twemproxy's node name for ketama.
func (s *beSpec) name() string {
	if s.label == "" {
		return s.addr()
	}
	return s.label
}

// identity is the key under which a backend is shared by the pools that
// name it: memcached reuses a backend for the same label, address and
// settings.
func (s *beSpec) identity(prefix string) string {
	id := fmt.Sprintf("%s\x00%s\x00%s\x00%v\x00%v", prefix, s.label, s.addr(), s.tun, s.down)
	if s.log != nil {
		id += fmt.Sprintf("\x00%v", *s.log)
	}
	return id
}

// beRef is one backend of a pool.
type beRef struct {
	b        *backend.Backend
	label    string
	host     string
	port     string
	down     bool
	internal *internalBackend // the proxy's own cache (v2_internal.go), in place of b
	log      *beLog           // requests to log (v2_belog.go); nil: none
	// depthLimit fails a request at once, as memcached's
	// backend_depth_limit, when more than that many are already queued
	// or in flight to the backend; failedDepth counts them for the router.
	depthLimit  int64
	failedDepth *atomic.Int64
}

// overDepth reports whether a request to be must fail for its depth
// limit, and counts it if so.
func (be *beRef) overDepth() bool {
	if be.depthLimit <= 0 {
		return false
	}
	st := be.b.Stats()
	if st.InQueue.Load()+st.OutQueue.Load() <= be.depthLimit {
		return false
	}
	be.failedDepth.Add(1)
	return true
}

// send queues c on the backend, or stages it in bt when bt is not nil
// (it goes out when bt is flushed). A call that goes to none of the
// backend's sockets is answered at once: from the internal cache, or
// failed for a backend configured down (as a bad backend fails it) or
// over its depth limit.
func (be *beRef) send(c *backend.Call, hint uint32, bt *backend.Batch) {
	switch {
	case be.internal != nil:
		be.sendInternal(c)
		return
	case be.down:
		c.Reply = codec.Reply{Err: backend.ErrorFor(backend.CauseMarkedBad)}
	case be.overDepth():
		c.Reply = codec.Reply{Err: errDepthLimit}
	case bt != nil:
		be.b.Stage(c, hint, bt)
		return
	default:
		be.b.Send(c, hint)
		return
	}
	c.Done(c)
}

// filter kinds (mcp.pool filter option).
const (
	filterNone = iota
	filterStop
	filterTags
)

// pool is an mcp.pool: backends and the key placement over them.
type pool struct {
	id     int // 1-based, in creation order, for messages
	shard  *sharding.Pool
	bes    []*beRef // in shard.Servers() order
	filter int
	conf   []byte
	logs   bool // a backend has the log option: requests go through Lua, which logs them
}

// pick returns the backend that takes key.
func (p *pool) pick(key []byte) (*beRef, error) {
	if p.shard == nil { // the internal cache's pool
		return p.bes[0], nil
	}
	idx, err := p.shard.Pick(p.hashKey(key))
	if err != nil {
		return nil, err
	}
	return p.bes[idx], nil
}

// hashKey applies the pool's key filter (memcached's
// mcp_key_hash_filter_stop and _tag): "stop" hashes the key up to the first
// occurrence of conf; "tags" hashes what lies between the first conf[0] and
// the next conf[1] after it, if that closing tag exists.
func (p *pool) hashKey(key []byte) []byte {
	switch p.filter {
	case filterStop:
		if i := bytes.Index(key, p.conf); i >= 0 {
			return key[:i]
		}
	case filterTags:
		i := bytes.IndexByte(key, p.conf[0])
		if i < 0 || len(key)-i <= 1 {
			return key
		}
		if j := bytes.IndexByte(key[i+1:], p.conf[1]); j >= 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// distObj is an mcp.dist_* value: a distribution kind of package sharding.
type distObj struct{ kind string }

// hashObj is an mcp.hash_* value: a hash name of package sharding.
type hashObj struct{ name string }

// distributions are the mcp.dist_* names. jump and ring are memcached's;
// ketama, modula and random are twemproxy's.
var distributions = map[string]string{
	"dist_jump_hash": "jump",
	"dist_ring_hash": "ring",
	"dist_ketama":    "ketama",
	"dist_modula":    "modula",
	"dist_random":    "random",
}

// hashNames returns the mcp.hash_* names and the sharding hash each one
// is: hash_xxhash is memcached's XXH3 (seeded), hash_xxh64 is XXH64 and
// every other sharding hash keeps its name (hash_fnv1a_64, hash_md5, ...).
func hashNames() map[string]string {
	m := map[string]string{"hash_xxhash": "xxh3"}
	for _, n := range sharding.HashNames() {
		if n == "xxhash" {
			m["hash_xxh64"] = n
			continue
		}
		m["hash_"+n] = n
	}
	return m
}

// poolOptions are mcp.pool's options.
type poolOptions struct {
	dist     string
	hash     string
	seed     uint64
	filter   int
	conf     string
	beprefix string
	ringMode string
	ringPts  int
	// perWorker is iothread = false: memcached gives each worker thread
	// the pool's backends of its own; here each backend gets its sockets
	// once per Lua state (Config.Workers), and a client's socket is chosen
	// by its number as before.
	perWorker bool
}

// buildPool places specs with opts, sharing backends through reg.
func (r *Router) buildPool(id int, specs []*beSpec, o poolOptions, reg map[string]*beRef) (*pool, error) {
	servers := make([]sharding.Server, len(specs))
	keepOrder := o.dist == "jump" || o.dist == "ring"
	for i, s := range specs {
		name := s.name() // twemproxy's node name, hashed by ketama
		switch o.dist {
		case "jump":
			name = strconv.Itoa(i + 1)
		case "ring":
			name = net.JoinHostPort(s.host, s.port)
		}
		servers[i] = sharding.Server{Name: name, Weight: s.weight}
	}
	shard, err := sharding.New(sharding.Config{
		Servers:      servers,
		Hash:         o.hash,
		Distribution: o.dist,
		Seed:         o.seed,
		KeepOrder:    keepOrder,
		Dist:         sharding.DistOptions{RingMode: o.ringMode, RingPoints: o.ringPts},
	})
	if err != nil {
		return nil, err
	}
	bySlot := make(map[string]*beSpec, len(specs))
	for i, s := range specs {
		bySlot[servers[i].Name] = s
	}
	p := &pool{id: id, shard: shard, filter: o.filter, conf: []byte(o.conf)}
	for _, srv := range shard.Servers() {
		s := bySlot[srv.Name]
		if o.perWorker {
			own := *s
			own.tun.conns *= r.cfg.Workers
			s = &own
		}
		p.bes = append(p.bes, r.backendFor(s, o.beprefix, reg))
		p.logs = p.logs || s.log != nil
	}
	return p, nil
}

// backendFor returns the connection for s, making it on first use.
func (r *Router) backendFor(s *beSpec, prefix string, reg map[string]*beRef) *beRef {
	id := s.identity(prefix)
	if be, ok := reg[id]; ok {
		return be
	}
	b := r.cfg.Backends.Get(backend.Config{
		Addr:           s.addr(),
		Name:           s.name(),
		Dialect:        r.cfg.Dialect,
		Handshake:      r.cfg.Handshake,
		MetaRewrite:    r.cfg.MetaRewrite,
		Conns:          s.tun.conns,
		ConnectTimeout: s.tun.connect,
		Timeout:        s.tun.read,
		FailureLimit:   s.tun.failureLimit,
		RetryTimeout:   s.tun.retry,
		HealthInterval: r.cfg.HealthInterval,
		HealthTimeout:  r.cfg.HealthTimeout,
		TCPKeepalive:   s.tun.keepalive,
		Preconnect:     r.cfg.Preconnect && !s.down,
		// memcached's proxy's failure rule, unless the pool asked for
		// the native one (Config.Reconnect).
		Reconnect: r.cfg.Reconnect,
		// Each get a route sends goes alone, as memcached's proxy
		// writes it: its server sees the requests the route made.
		NoJoin:       true,
		BreaksStream: r.breaksStream(),
		OnEvent:      backendEvents(r.cfg.Hub, s),
		FirstIdle:    true, // memcached's choice of a backend's socket
		Logger:       r.cfg.Logger,
	})
	r.backends = append(r.backends, b)
	be := &beRef{b: b, label: s.label, host: s.host, port: s.port, down: s.down, log: s.log,
		depthLimit: int64(s.tun.depthLimit), failedDepth: &r.failedDepth}
	reg[id] = be
	return be
}

// breaksStream is the backends' backend.Config.BreaksStream: a memcache
// pool's, as memcached's proxy, drops a socket that answered ERROR or
// CLIENT_ERROR once the reply is passed on.
func (r *Router) breaksStream() func([]byte) bool {
	if r.cfg.Redis {
		return nil
	}
	return memcache.BreaksStream
}
