package lua

import (
	"strings"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/lua/internal/bytecode"
)

// Type names of the route stage's userdata, as memcached names them.
const (
	typeRequest   = "mcp.request"
	typeResponse  = "mcp.response"
	typePoolProxy = "mcp.pool_proxy"
)

// newMCP builds the mcp table of a state: the constants, mcp.start_arg,
// the hash and distribution objects, mcp.log and the stage's functions.
func (r *Router) newMCP(L *glua.LState, funcs map[string]glua.LGFunction) *glua.LTable {
	mcp := L.NewTable()
	for name, v := range numericConstants {
		mcp.RawSetString(name, glua.LNumber(v))
	}
	if r.cfg.Redis {
		for _, name := range redisCommands {
			mcp.RawSetString("CMD_"+strings.ToUpper(name), glua.LString(name))
		}
	} else {
		for i, name := range mcConstNames {
			if name != "" {
				mcp.RawSetString(name, glua.LNumber(i))
			}
		}
	}
	mcp.RawSetString("start_arg", startArg(L, r.cfg.StartArg)) // every stage, as in memcached
	mcp.RawSetString("CMD_ANY", glua.LNumber(cmdAny))
	mcp.RawSetString("CMD_ANY_STORAGE", glua.LNumber(cmdAnyStorage))
	hashes := map[string]*glua.LUserData{}
	for name, h := range hashNames() {
		ud := L.NewUserData()
		ud.Value = &hashObj{name: h}
		hashes[h] = ud
		mcp.RawSetString(name, ud)
	}
	for name, kind := range distributions {
		ud := L.NewUserData()
		ud.Value = &distObj{kind: kind}
		if kind == "ring" { // mcp.dist_ring_hash.hash is the md5 key hash
			index := L.NewTable()
			index.RawSetString("hash", hashes["md5"])
			mt := L.NewTable()
			mt.RawSetString("__index", index)
			ud.Metatable = mt
		}
		mcp.RawSetString(name, ud)
	}
	for name, fn := range funcs {
		mcp.RawSetString(name, L.NewFunction(fn))
	}
	mcp.RawSetString("log", L.NewFunction(func(L *glua.LState) int {
		msg := L.CheckString(1)
		r.log.Info("lua log", "msg", msg)
		r.watchUser(msg)
		return 0
	}))
	L.SetGlobal("mcp", mcp)
	return mcp
}

// newWorker builds worker id's state: the route stage API, the script's
// top level, then mcp_config_routes with a copy of what
// mcp_config_pools returned.
func newWorker(r *Router, id int, config glua.LValue) (*worker, error) {
	L := newState(r.log)
	w := &worker{
		r: r, id: id, L: L, cancel: setContext(L),
		parser: r.cfg.Dialect.NewRequestParser(r.cfg.Options),
		hooks:  &hooks{},
		kick:   make(chan struct{}, 1),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
	}
	ok := false
	defer func() {
		if !ok {
			w.cancel()
			L.Close()
		}
	}()
	reads := watchAbsent(L)
	ld := r.installLoaders(L)
	w.reqMT = w.typeMetatable(typeRequest, w.requestMethods())
	w.resMT = w.typeMetatable(typeResponse, responseMethods)
	reads.watchMethods(L, w.reqMT.RawGetString("__index").(*glua.LTable), "request", requestAbsent)
	reads.watchMethods(L, w.resMT.RawGetString("__index").(*glua.LTable), "response", responseAbsent)
	w.proxyMT = L.NewTypeMetatable(typePoolProxy)
	w.proxyCall = L.NewFunction(w.poolCall)
	w.proxyMT.RawSetString("__call", w.proxyCall)
	w.direct = map[*glua.LFunction]bytecode.PoolCall{}
	mcp := r.newMCP(L, w.functions())
	w.registerV2(mcp)
	reads.watchMethods(L, w.v2.rctxMT.RawGetString("__index").(*glua.LTable), "rctx", rctxAbsent)
	reads.watchMCP(L, mcp, false)
	w.countNesting()
	mk, err := L.LoadString(runnerSource)
	if err != nil {
		return nil, err
	}
	out, err := r.runSetup(L, mk, 1, L.NewFunction(w.handlerDone))
	if err != nil {
		return nil, err
	}
	w.runner = out[0].(*glua.LFunction)
	file := r.cfg.Path
	if err := r.runFiles(L); err != nil {
		return nil, err
	}
	routes := L.GetGlobal("mcp_config_routes")
	arg := w.importConfig(config, map[*glua.LTable]*glua.LTable{}, map[*pool]*glua.LUserData{})
	if _, err := r.runSetup(L, routes, 0, arg); err != nil {
		return nil, runError(file, "mcp_config_routes", err)
	}
	ld.loading = false
	if w.hooks.count == 0 && r.internal == nil { // with a cache, memcached serves every command from it
		return nil, &ConfigError{File: file, Msg: "mcp_config_routes attached no handler (call mcp.attach)"}
	}
	if id == 0 {
		if err := w.buildCrons(); err != nil {
			return nil, err
		}
	}
	reads.sealGlobals(L)
	ok = true
	go w.loop()
	return w, nil
}

// callMetatable makes the metatable of objects called as functions.
func (w *worker) callMetatable(name string, call glua.LGFunction) *glua.LTable {
	mt := w.L.NewTypeMetatable(name)
	mt.RawSetString("__call", w.L.NewFunction(call))
	return mt
}

// typeMetatable makes a metatable whose __index holds methods.
func (w *worker) typeMetatable(name string, methods map[string]glua.LGFunction) *glua.LTable {
	mt := w.L.NewTypeMetatable(name)
	index := w.L.NewTable()
	for n, fn := range methods {
		if strings.HasPrefix(n, "__") {
			mt.RawSetString(n, w.L.NewFunction(fn))
			continue
		}
		index.RawSetString(n, w.L.NewFunction(fn))
	}
	mt.RawSetString("__index", index)
	return mt
}

// importConfig copies v from the config state into the worker state,
// turning each pool into a callable pool proxy. Shared tables stay shared.
func (w *worker) importConfig(v glua.LValue, tables map[*glua.LTable]*glua.LTable, proxies map[*pool]*glua.LUserData) glua.LValue {
	switch v := v.(type) {
	case *glua.LUserData:
		if b, ok := v.Value.(*tbf); ok { // a global rate limit (exportConfig checked)
			ud := w.L.NewUserData()
			ud.Value = b
			ud.Metatable = w.v2.proxyTbfMT
			return ud
		}
		p := v.Value.(*pool) // exportConfig checked
		if ud, ok := proxies[p]; ok {
			return ud
		}
		ud := w.L.NewUserData()
		ud.Value = p
		ud.Metatable = w.proxyMT
		proxies[p] = ud
		return ud
	case *glua.LTable:
		if t, ok := tables[v]; ok {
			return t
		}
		t := w.L.NewTable()
		tables[v] = t
		v.ForEach(func(k, val glua.LValue) {
			t.RawSet(k, w.importConfig(val, tables, proxies))
		})
		return t
	}
	return v
}

// functions are the route stage's mcp functions. The config stage's
// tunables exist as no-ops, so a script may set them at its top level,
// which runs in every state.
func (w *worker) functions() map[string]glua.LGFunction {
	noop := func(*glua.LState) int { return 0 }
	configOnly := func(name string) glua.LGFunction {
		return func(L *glua.LState) int {
			L.RaiseError("mcp.%s can only be called from mcp_config_pools", name)
			return 0
		}
	}
	f := map[string]glua.LGFunction{
		"attach":             w.attach,
		"await":              w.awaitFunc(false),
		"await_logerrors":    w.awaitFunc(true),
		"request":            w.newRequest,
		"log_req":            w.logReq,
		"log_reqsample":      w.logReqSample,
		"stat":               w.stat,
		"time_real_millis":   timeRealMillis,
		"time_mono_millis":   timeMonoMillis,
		"backend":            configOnly("backend"),
		"pool":               configOnly("pool"),
		"ratelim_global_tbf": configOnly("ratelim_global_tbf"),
		"server_stats":       w.serverStats,
		"internal":           w.internalCall,
	}
	for _, name := range []string{
		"add_stat", "stat_limit", "backend_connect_timeout", "backend_retry_timeout",
		"backend_retry_waittime", "backend_read_timeout", "backend_failure_limit",
		"tcp_keepalive", "active_req_limit", "buffer_memory_limit", "backend_depth_limit",
		"backend_flap_time", "backend_flap_backoff_ramp", "backend_flap_backoff_max",
		"backend_use_iothread", "backend_use_tls", "init_tls", "luagc_ratio",
		"schedule_config_reload", "register_cron",
	} {
		f[name] = noop
	}
	f["schedule_config_reload"] = w.scheduleReload
	return f
}

// attach is mcp.attach(cmd, func[, tag]).
func (w *worker) attach(L *glua.LState) int {
	cmd := L.Get(1)
	fn, ok := L.Get(2).(*glua.LFunction)
	if !ok {
		fn, ok = w.attachV2(L, L.Get(2)) // a ready function generator or router
	}
	if !ok {
		L.RaiseError("Must pass a function to mcp.attach")
	}
	tag := ""
	if s, ok := L.Get(3).(glua.LString); ok {
		if len(s) < 1 || len(s) > 8 {
			L.RaiseError("mcp.attach: tag must be 1 to 8 characters")
		}
		tag = string(s)
	}
	if err := w.hooks.attach(cmd, fn, tag, w.r.cfg.Redis); err != nil {
		L.RaiseError("%s", err.Error())
	}
	if d, ok := bytecode.MatchPoolCall(fn); ok {
		w.direct[fn] = d
	}
	if !fn.IsG { // a plain function: memcached's "anonymous" generator, its one slot
		c := w.r.funcs.of("anonymous")
		c.funcs.Add(1)
		c.slots.Add(1)
	}
	return 0
}

// stat is mcp.stat(id, delta).
func (w *worker) stat(L *glua.LState) int {
	id := L.CheckInt(1)
	delta := L.CheckInt64(2)
	s := w.r.userStats
	if id < 1 || id > len(s) { // memcached counts an index below the highest declared
		L.RaiseError("stat index out of range")
	}
	s[id-1].value.Add(delta)
	return 0
}

// newRequest is mcp.request(line[, value]): value may be a string ending in
// "\r\n", or a response or request whose value is copied.
func (w *worker) newRequest(L *glua.LState) int {
	line := L.CheckString(1)
	buf := []byte(line)
	if !strings.HasSuffix(line, "\n") {
		buf = append(buf, "\r\n"...)
	}
	switch v := L.Get(2).(type) {
	case glua.LString:
		if !strings.HasSuffix(string(v), "\r\n") {
			L.RaiseError("value passed to mcp.request must end with \\r\\n")
		}
		buf = append(buf, v...)
	case *glua.LUserData:
		switch src := v.Value.(type) {
		case *response:
			buf = append(buf, src.value()...)
		case *request:
			if src.req != nil {
				buf = append(buf, src.value()...)
			}
		}
	}
	req, err := w.parse(buf)
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	ud := L.NewUserData()
	ud.Value = &request{w: w, req: req, owned: true}
	ud.Metatable = w.reqMT
	L.Push(ud)
	return 1
}

// countNesting wraps the library functions that call back into Lua so that
// w.nested tells whether a handler runs inside one of them.
func (w *worker) countNesting() {
	L := w.L
	wrap := func(t *glua.LTable, name string) {
		fn, ok := t.RawGetString(name).(*glua.LFunction)
		if !ok {
			return
		}
		t.RawSetString(name, L.NewFunction(func(L *glua.LState) int {
			top := L.GetTop()
			L.Push(fn)
			for i := 1; i <= top; i++ {
				L.Push(L.Get(i))
			}
			w.nested++
			defer func() { w.nested-- }()
			L.Call(top, glua.MultRet)
			return L.GetTop() - top
		}))
	}
	g := L.Get(glua.GlobalsIndex).(*glua.LTable)
	wrap(g, "pcall")
	wrap(g, "xpcall")
	wrap(L.GetGlobal("table").(*glua.LTable), "sort")
	wrap(L.GetGlobal("string").(*glua.LTable), "gsub")
}
