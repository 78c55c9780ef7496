package lua

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/sharding"
)

// configStage is the state of the config run: the tunables the script has
// set so far and the backends and pools it has made.
type configStage struct {
	r        *Router
	L        *glua.LState
	tun      tunables
	reg      map[string]*beRef
	statMax  int
	beMT     *glua.LTable
	poolMT   *glua.LTable
	distObjs map[string]glua.LValue
	crons    []*cronDef // mcp.register_cron, in order
}

// Type names of the config stage's userdata, as memcached names them.
const (
	typeBackend = "mcp.backend"
	typePool    = "mcp.pool"
)

// configure runs the route file in the config state: its top level, then
// mcp_config_pools(nil). It returns what mcp_config_pools returned, to be
// copied into every worker state.
func (r *Router) configure() (glua.LValue, error) {
	L := newState(r.log)
	defer L.Close()
	reads := watchAbsent(L)
	r.installLoaders(L) // the config state is loading all its life
	cancel := setContext(L)
	defer cancel()
	d := r.cfg.Defaults
	cs := &configStage{
		r: r, L: L, reg: map[string]*beRef{}, statMax: 1024,
		tun: tunables{
			connect:      orDuration(d.ConnectTimeout, mcConnectTimeout),
			retry:        orDuration(d.RetryTimeout, mcRetryTimeout),
			read:         orDuration(d.ReadTimeout, mcReadTimeout),
			failureLimit: orInt(d.FailureLimit, mcFailureLimit),
			keepalive:    d.TCPKeepalive,
			conns:        orInt(d.Conns, 1),
		},
	}
	cs.beMT = L.NewTypeMetatable(typeBackend)
	cs.poolMT = L.NewTypeMetatable(typePool)
	mcp := r.newMCP(L, cs.functions())
	reads.watchMCP(L, mcp, true)
	cs.distObjs = map[string]glua.LValue{}
	for name := range distributions {
		cs.distObjs[name] = mcp.RawGetString(name)
	}
	if prev := r.cfg.Previous; prev != nil {
		for name, v := range prev.kept {
			L.SetGlobal(name, v)
		}
	}
	file := r.cfg.Path
	if err := r.runFiles(L); err != nil {
		return nil, err
	}
	fn, ok := L.GetGlobal("mcp_config_pools").(*glua.LFunction)
	if !ok {
		return nil, &ConfigError{File: file, Msg: "mcp_config_pools is not defined (a route file must define mcp_config_pools and mcp_config_routes)"}
	}
	if _, ok := L.GetGlobal("mcp_config_routes").(*glua.LFunction); !ok {
		return nil, &ConfigError{File: file, Msg: "mcp_config_routes is not defined (a route file must define mcp_config_pools and mcp_config_routes)"}
	}
	out, err := r.runSetup(L, fn, 1, glua.LNil)
	if err != nil {
		return nil, runError(file, "mcp_config_pools", err)
	}
	if err := exportConfig(out[0]); err != nil {
		return nil, &ConfigError{File: file, Msg: "mcp_config_pools: " + err.Error()}
	}
	if err := cs.exportCrons(); err != nil {
		return nil, err
	}
	r.kept = keptGlobals(L)
	return out[0], nil
}

// keptGlobals are the globals of config state L that hold a number, a
// string or a boolean. memcached's proxy runs a reload's route file and
// mcp_config_pools in the config state it already has, so a route file
// may keep such a value across reloads (a count of them); shardproxy
// builds every router in fresh states, and hands these on instead.
func keptGlobals(L *glua.LState) map[string]glua.LValue {
	kept := map[string]glua.LValue{}
	L.G.Global.ForEach(func(k, v glua.LValue) {
		name, ok := k.(glua.LString)
		if !ok {
			return
		}
		switch v.(type) {
		case glua.LNumber, glua.LString, glua.LBool:
			kept[string(name)] = v
		}
	})
	return kept
}

// functions are the config stage's mcp functions.
func (cs *configStage) functions() map[string]glua.LGFunction {
	seconds := func(field *time.Duration) glua.LGFunction {
		return func(L *glua.LState) int {
			*field = checkSeconds(L, 1)
			return 0
		}
	}
	ignored := func(L *glua.LState) int { return 0 }
	return map[string]glua.LGFunction{
		"backend":                   cs.backend,
		"pool":                      cs.pool,
		"add_stat":                  cs.addStat,
		"register_cron":             cs.registerCron,
		"ratelim_global_tbf":        cs.ratelimGlobalTbf,
		"server_stats":              cs.serverStats,
		"servers":                   cs.servers,
		"stat_limit":                cs.statLimit,
		"backend_connect_timeout":   seconds(&cs.tun.connect),
		"backend_retry_timeout":     cs.retryWait,
		"backend_retry_waittime":    cs.retryWait,
		"backend_read_timeout":      seconds(&cs.tun.read),
		"backend_failure_limit":     cs.failureLimit,
		"tcp_keepalive":             cs.keepalive,
		"active_req_limit":          cs.activeReqLimit,
		"buffer_memory_limit":       cs.bufferMemoryLimit,
		"backend_depth_limit":       cs.depthLimit,
		"backend_flap_time":         ignored,
		"backend_flap_backoff_ramp": ignored,
		"backend_flap_backoff_max":  ignored,
		"backend_use_iothread":      ignored,
		"backend_use_tls":           ignored,
		"init_tls":                  ignored,
		"luagc_ratio":               ignored,
		"schedule_config_reload":    ignored,
	}
}

// checkSeconds reads a non-negative number of seconds (fractions allowed).
func checkSeconds(L *glua.LState, n int) time.Duration {
	v := float64(L.CheckNumber(n))
	if v < 0 || v > 1e9 {
		L.ArgError(n, "seconds must be between 0 and 1e9")
	}
	return time.Duration(v * float64(time.Second))
}

// retryWait sets the retry wait of the backends made after it: memcached
// keeps it in whole seconds, rounded, at least one.
func (cs *configStage) retryWait(L *glua.LState) int {
	cs.tun.retry = wholeSeconds(checkSeconds(L, 1))
	return 0
}

// wholeSeconds rounds d to whole seconds as memcached rounds a retry
// wait: half a second or more up, and at least one.
func wholeSeconds(d time.Duration) time.Duration {
	return max(d.Round(time.Second), time.Second)
}

// depthLimit is mcp.backend_depth_limit(n): the depthlimit of the
// backends made after it.
func (cs *configStage) depthLimit(L *glua.LState) int {
	n := L.CheckInt(1)
	if n < 0 {
		L.RaiseError("backend_depth_limit must be >= 0")
	}
	cs.tun.depthLimit = n
	return 0
}

func (cs *configStage) failureLimit(L *glua.LState) int {
	n := L.CheckInt(1)
	if n < 0 {
		L.RaiseError("backend_failure_limit must be >= 0")
	}
	cs.tun.failureLimit = n
	return 0
}

func (cs *configStage) keepalive(L *glua.LState) int {
	cs.tun.keepalive = L.CheckBool(1)
	return 0
}

func (cs *configStage) activeReqLimit(L *glua.LState) int {
	n := L.CheckInt(1)
	if n < 0 {
		L.RaiseError("active_req_limit must be >= 0")
	}
	cs.r.activeLimit = int64(n)
	return 0
}

func (cs *configStage) bufferMemoryLimit(L *glua.LState) int {
	n := L.CheckInt(1)
	if n < 0 {
		L.RaiseError("buffer_memory_limit must be >= 0")
	}
	r := cs.r
	r.bufferLimit, r.overBuffer = int64(n)<<10, nil
	if n > 0 {
		r.overBuffer = func() bool { return r.bufferUsed.Load() > r.bufferLimit }
	}
	return 0
}

func (cs *configStage) statLimit(L *glua.LState) int {
	n := L.CheckInt(1)
	if n < 1 || n > 1<<16 {
		L.RaiseError("stat_limit must be from 1 to 65536")
	}
	cs.statMax = n
	return 0
}

// maxStatName is the longest mcp.add_stat name: memcached's stat key
// (128 bytes) less "user_" and its terminating zero.
const maxStatName = 122

// addStat is mcp.add_stat(id, name): declare user counter id (from 1),
// as memcached does. The counters outlive a reload (Config.Previous): an
// id declared again under its name counts on, one given a new name starts
// again from zero, and one a reload does not declare stays as it was. An
// empty name hides the counter from the stats.
func (cs *configStage) addStat(L *glua.LState) int {
	id := L.CheckInt(1)
	name := L.CheckString(2)
	switch {
	case id < 1:
		L.RaiseError("stat index must be 1 or higher")
	case id > cs.statMax:
		L.RaiseError("stat index must be %d or less", cs.statMax)
	case len(name) > maxStatName:
		L.RaiseError("stat name too long: %s", name)
	case strings.ContainsAny(name, " \t\r\n\v\f"):
		L.RaiseError("stat cannot contain spaces or newlines")
	}
	r := cs.r
	for len(r.userStats) < id {
		r.userStats = append(r.userStats, &userStat{})
	}
	if r.userStats[id-1].name != name {
		r.userStats[id-1] = &userStat{name: name}
	}
	return 0
}

// backendOptions are the keys the table form of mcp.backend reads.
var backendOptions = map[string]bool{
	"label": true, "host": true, "port": true, "connecttimeout": true,
	"retrytimeout": true, "retrywaittime": true, "readtimeout": true,
	"failurelimit": true, "tcpkeepalive": true, "connections": true,
	"down": true, "weight": true, "depthlimit": true, "log": true,
}

// ignoredBackendOptions are memcached backend options shardproxy accepts
// and does not act on.
var ignoredBackendOptions = map[string]bool{
	"flaptime": true, "flapbackofframp": true,
	"flapbackoffmax": true, "tls": true, "iothread": true,
}

// backend is mcp.backend(label, host, port) or mcp.backend{label=, host=,
// port=, options...}.
func (cs *configStage) backend(L *glua.LState) int {
	s := &beSpec{tun: cs.tun, weight: 1}
	if t, ok := L.Get(1).(*glua.LTable); ok {
		cs.backendTable(L, t, s)
	} else {
		s.label = L.CheckString(1)
		s.host = L.CheckString(2)
		s.port = L.CheckString(3)
	}
	// memcached accepts an empty label: the backend is then known by its
	// address (see beSpec.name), and its events say "label=".
	if s.host == "" {
		L.RaiseError("backend host must not be empty")
	}
	if s.host[0] != '/' {
		if p, err := strconv.Atoi(s.port); err != nil || p < 1 || p > 65535 {
			L.RaiseError("backend %s: bad port %q", s.name(), s.port)
		}
	}
	ud := L.NewUserData()
	ud.Value = s
	ud.Metatable = cs.beMT
	L.Push(ud)
	return 1
}

// backendTable reads the table form of mcp.backend.
func (cs *configStage) backendTable(L *glua.LState, t *glua.LTable, s *beSpec) {
	t.ForEach(func(k, v glua.LValue) {
		key, ok := k.(glua.LString)
		if !ok {
			L.RaiseError("backend options: keys must be names, not %s", k.Type())
		}
		name := string(key)
		if ignoredBackendOptions[name] {
			cs.r.log.Warn("lua backend option ignored", "option", name)
			return
		}
		if !backendOptions[name] {
			L.RaiseError("backend: unknown option %q", name)
		}
		cs.backendOption(L, s, name, v)
	})
	for _, req := range []string{"label", "host", "port"} {
		if t.RawGetString(req) == glua.LNil {
			L.RaiseError("backend must have a %s argument", req)
		}
	}
}

// backendOption sets one option of the table form.
func (cs *configStage) backendOption(L *glua.LState, s *beSpec, name string, v glua.LValue) {
	o := backendOpt{L: L, name: name, v: v}
	switch name {
	case "label":
		s.label = o.str()
	case "host":
		s.host = o.str()
	case "port":
		s.port = o.str()
	case "connecttimeout":
		s.tun.connect = o.secs()
	case "retrytimeout":
		s.tun.retry = o.secs()
	case "retrywaittime":
		s.tun.retry = wholeSeconds(o.secs())
	case "readtimeout":
		s.tun.read = o.secs()
	case "failurelimit":
		s.tun.failureLimit = int(o.num(0, 1<<31-1))
	case "tcpkeepalive":
		s.tun.keepalive = o.boolean()
	case "connections":
		s.tun.conns = int(o.num(1, 8))
	case "down":
		s.down = o.boolean()
	case "weight":
		s.weight = int(o.num(1, 1<<20))
	case "depthlimit":
		s.tun.depthLimit = int(o.num(0, 1<<31-1))
	case "log":
		s.log = readBackendLog(L, v)
	}
}

// backendOpt is the value v of option name of mcp.backend's table form,
// read as the option's type; a value of another type raises an error
// naming both.
type backendOpt struct {
	L    *glua.LState
	name string
	v    glua.LValue
}

// str reads a string; a number is taken as its decimal text.
func (o backendOpt) str() string {
	switch v := o.v.(type) {
	case glua.LString:
		return string(v)
	case glua.LNumber:
		return v.String()
	}
	o.L.RaiseError("backend option %s must be a string, not %s", o.name, o.v.Type())
	return ""
}

// num reads a number from lo to hi.
func (o backendOpt) num(lo, hi float64) float64 {
	n, ok := o.v.(glua.LNumber)
	if !ok {
		o.L.RaiseError("backend option %s must be a number, not %s", o.name, o.v.Type())
	}
	if float64(n) < lo || float64(n) > hi {
		o.L.RaiseError("backend option %s must be from %v to %v, not %v", o.name, lo, hi, n)
	}
	return float64(n)
}

// boolean reads true or false.
func (o backendOpt) boolean() bool {
	b, ok := o.v.(glua.LBool)
	if !ok {
		o.L.RaiseError("backend option %s must be true or false, not %s", o.name, o.v.Type())
	}
	return bool(b)
}

// secs reads a number of seconds, fractions allowed.
func (o backendOpt) secs() time.Duration {
	return time.Duration(o.num(0, 1e9) * float64(time.Second))
}

// poolOptionKeys are the keys mcp.pool's options table may have.
var poolOptionKeys = map[string]bool{
	"dist": true, "hash": true, "seed": true, "filter": true,
	"filter_conf": true, "beprefix": true, "iothread": true,
	"omode": true, "obuckets": true,
}

// pool is mcp.pool(backends[, options]).
func (cs *configStage) pool(L *glua.LState) int {
	list := L.CheckTable(1)
	n := list.Len()
	if n == 0 {
		L.RaiseError("pool must have at least one backend")
	}
	specs := make([]*beSpec, n)
	for i := range n {
		s, ok := userValue[*beSpec](list.RawGetInt(i + 1))
		if !ok {
			L.RaiseError("pool: item %d is not a backend (made by mcp.backend)", i+1)
		}
		specs[i] = s
	}
	o := poolOptions{dist: "jump", hash: "xxh3"}
	if opts, ok := L.Get(2).(*glua.LTable); ok {
		cs.poolOptions(L, opts, &o)
	} else if L.Get(2) != glua.LNil {
		L.ArgError(2, "options must be a table")
	}
	p, err := cs.r.buildPool(len(cs.r.pools)+1, specs, o, cs.reg)
	if err != nil {
		L.RaiseError("pool: %v", err)
	}
	cs.r.pools = append(cs.r.pools, p)
	ud := L.NewUserData()
	ud.Value = p
	ud.Metatable = cs.poolMT
	L.Push(ud)
	return 1
}

// poolOptions reads mcp.pool's options table into o.
func (cs *configStage) poolOptions(L *glua.LState, t *glua.LTable, o *poolOptions) {
	t.ForEach(func(k, v glua.LValue) {
		key, ok := k.(glua.LString)
		if !ok || !poolOptionKeys[string(key)] {
			L.RaiseError("pool: unknown option %s", glua.LVAsString(k))
		}
	})
	placementOptions(L, t, o)
	cs.filterOption(L, t, o)
	if s, ok := poolString(L, t, "beprefix"); ok {
		o.beprefix = s
	}
	if v := t.RawGetString("iothread"); v != glua.LNil {
		b, ok := v.(glua.LBool)
		if !ok {
			L.RaiseError("pool: iothread must be true or false")
		}
		o.perWorker = !bool(b)
	}
	ringOptions(L, t, o)
}

// placementOptions reads dist, hash and seed: how keys map to backends.
func placementOptions(L *glua.LState, t *glua.LTable, o *poolOptions) {
	if v := t.RawGetString("dist"); v != glua.LNil {
		d, ok := userValue[*distObj](v)
		if !ok {
			L.RaiseError("pool: dist must be one of mcp.dist_jump_hash, mcp.dist_ring_hash, mcp.dist_ketama, mcp.dist_modula, mcp.dist_random")
		}
		o.dist = d.kind
	}
	if v := t.RawGetString("hash"); v != glua.LNil {
		h, ok := userValue[*hashObj](v)
		if !ok {
			L.RaiseError("pool: hash must be an mcp.hash_* value")
		}
		o.hash = h.name
	}
	if s, ok := poolString(L, t, "seed"); ok {
		o.seed = sharding.XXH3([]byte(s), 0) // memcached hashes the seed string
	}
}

// ringOptions reads omode and obuckets, the options of mcp.dist_ring_hash.
func ringOptions(L *glua.LState, t *glua.LTable, o *poolOptions) {
	if s, ok := poolString(L, t, "omode"); ok {
		o.ringMode = s
	}
	if v := t.RawGetString("obuckets"); v != glua.LNil {
		n, ok := v.(glua.LNumber)
		if !ok || n < 1 || n > 1<<16 {
			L.RaiseError("pool: obuckets must be a number from 1 to 65536")
		}
		o.ringPts = int(n)
	}
}

// poolString returns the string option name of t, and false when t has
// none; any other value raises an error.
func poolString(L *glua.LState, t *glua.LTable, name string) (string, bool) {
	v := t.RawGetString(name)
	if v == glua.LNil {
		return "", false
	}
	s, ok := v.(glua.LString)
	if !ok {
		L.RaiseError("pool: %s must be a string", name)
	}
	return string(s), true
}

// filterOption reads filter and filter_conf.
func (cs *configStage) filterOption(L *glua.LState, t *glua.LTable, o *poolOptions) {
	v := t.RawGetString("filter")
	if v == glua.LNil {
		return
	}
	switch glua.LVAsString(v) {
	case "stop":
		o.filter = filterStop
	case "tags":
		o.filter = filterTags
	default:
		L.RaiseError("pool: unknown hash filter %q (want \"stop\" or \"tags\")", glua.LVAsString(v))
	}
	conf, ok := t.RawGetString("filter_conf").(glua.LString)
	if !ok {
		L.RaiseError("pool: hash filter requires 'filter_conf' string")
	}
	if len(conf) < 2 || len(conf) > 5 {
		L.RaiseError("pool: hash filter conf must be between 2 and 5 characters")
	}
	o.conf = string(conf)
}

// userValue returns the Go value of userdata v as a T.
func userValue[T any](v glua.LValue) (T, bool) {
	ud, ok := v.(*glua.LUserData)
	if !ok {
		var zero T
		return zero, false
	}
	t, ok := ud.Value.(T)
	return t, ok
}

// exportConfig checks that v can go to the worker states: nil, booleans,
// numbers, strings, pools and tables of those with string or number keys.
func exportConfig(v glua.LValue) error {
	var check func(v glua.LValue, path string, seen map[*glua.LTable]bool) error
	check = func(v glua.LValue, path string, seen map[*glua.LTable]bool) error {
		switch v := v.(type) {
		case *glua.LNilType, glua.LBool, glua.LNumber, glua.LString:
			return nil
		case *glua.LUserData:
			switch u := v.Value.(type) {
			case *pool:
				return nil
			case *tbf:
				if u.global {
					return nil
				}
			}
		case *glua.LTable:
			if seen[v] {
				return nil
			}
			seen[v] = true
			var err error
			v.ForEach(func(k, val glua.LValue) {
				if err != nil {
					return
				}
				switch k.(type) {
				case glua.LString, glua.LNumber:
				default:
					err = fmt.Errorf("configuration table keys must be strings or numbers (at %s)", path)
					return
				}
				err = check(val, path+"."+glua.LVAsString(k), seen)
			})
			return err
		}
		return fmt.Errorf("unhandled %s in configuration table (at %s): only tables, strings, numbers, booleans, pools and global rate limits can be passed to mcp_config_routes", v.Type(), path)
	}
	return check(v, "result", map[*glua.LTable]bool{})
}

func orDuration(v, def time.Duration) time.Duration {
	if v > 0 {
		return v
	}
	return def
}

func orInt(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
