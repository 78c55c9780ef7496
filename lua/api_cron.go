package lua

import (
	"fmt"
	"math"
	"time"

	glua "github.com/yuin/gopher-lua"
)

// mcp.register_cron(name, {every = seconds, func = f[, rerun = false]})
// is called at config time. memcached runs crons in its config state; here
// that state is gone once the file has loaded, so a cron runs in worker
// 0's state instead, as an event of its queue: never at the same time as
// that state's handlers, and seeing its globals. f is rebuilt there from
// its compiled code, with copies of the values it closes over (its
// upvalues), made as mcp_config_routes's argument is made.

// cronDef is a cron as the config stage registered it.
type cronDef struct {
	name   string
	every  time.Duration
	rerun  bool
	line   int
	fn     *glua.LFunction // in the config state, which is closed by now
	upvals []glua.LValue   // fn's upvalues, read after the config stage ran
}

// cronJob is a cron ready to run in worker 0's state.
type cronJob struct {
	name  string
	every time.Duration
	rerun bool
	fn    *glua.LFunction
}

// registerCron is the config stage's mcp.register_cron. A later cron of
// the same name replaces the earlier one.
func (cs *configStage) registerCron(L *glua.LState) int {
	name := L.CheckString(1)
	opts := L.CheckTable(2)
	fv := opts.RawGetString("func")
	fn, ok := fv.(*glua.LFunction)
	switch {
	case fv == glua.LNil:
		L.RaiseError("proxy cron entry missing 'func' field")
	case !ok:
		L.RaiseError("proxy cron entry 'func' must be a function, not %s", fv.Type())
	}
	rerun := true
	if v := opts.RawGetString("rerun"); v != glua.LNil {
		rerun = glua.LVAsBool(v)
	}
	every := opts.RawGetString("every")
	n, ok := every.(glua.LNumber)
	switch {
	case every == glua.LNil:
		L.RaiseError("proxy cron entry missing 'every' field")
	case !ok:
		L.RaiseError("proxy cron entry 'every' must be a number, not %s", every.Type())
	case n < 1:
		L.RaiseError("proxy cron entry 'every' must be > 0")
	case n != glua.LNumber(math.Trunc(float64(n))) || n > 1e9:
		L.RaiseError("proxy cron entry 'every' must be a whole number of seconds")
	}
	line := 0
	if _, dbg, ok := caller(L); ok {
		line = dbg.CurrentLine
	}
	def := &cronDef{name: name, every: time.Duration(n) * time.Second, rerun: rerun, line: line, fn: fn}
	for i, c := range cs.crons {
		if c.name == name {
			cs.crons[i] = def
			return 0
		}
	}
	cs.crons = append(cs.crons, def)
	return 0
}

// exportCrons reads the crons' upvalues, now that the functions that
// made them have returned, and checks that they can go to worker 0.
func (cs *configStage) exportCrons() error {
	for _, c := range cs.crons {
		for i, uv := range c.fn.Upvalues {
			v := uv.Value()
			if err := exportConfig(v); err != nil {
				name := "?"
				if i < len(c.fn.Proto.DbgUpvalues) {
					name = c.fn.Proto.DbgUpvalues[i]
				}
				return &ConfigError{File: cs.r.cfg.Path, Line: c.line, Msg: fmt.Sprintf(
					"mcp.register_cron(%q): func uses the local %s, a %s: a cron runs in a worker state, "+
						"and takes only tables, strings, numbers, booleans and pools from outside it "+
						"(use a global instead)", c.name, name, v.Type())}
			}
			c.upvals = append(c.upvals, v)
		}
	}
	cs.r.cronDefs = cs.crons
	return nil
}

// upvalueSource makes a closed upvalue, to be given a value and handed to
// a rebuilt function.
const upvalueSource = `local v
return function() return v end`

// buildCrons rebuilds the config stage's crons in w's state. Upvalues
// shared by the crons' functions stay shared.
func (w *worker) buildCrons() error {
	if len(w.r.cronDefs) == 0 {
		return nil
	}
	L := w.L
	mk, err := L.LoadString(upvalueSource)
	if err != nil {
		return err
	}
	tables, proxies := map[*glua.LTable]*glua.LTable{}, map[*pool]*glua.LUserData{}
	shared := map[*glua.Upvalue]*glua.Upvalue{}
	for _, c := range w.r.cronDefs {
		fn := L.NewFunctionFromProto(c.fn.Proto)
		for i, uv := range c.fn.Upvalues {
			if u, ok := shared[uv]; ok {
				fn.Upvalues[i] = u
				continue
			}
			out, err := w.r.runSetup(L, mk, 1)
			if err != nil {
				return err
			}
			u := out[0].(*glua.LFunction).Upvalues[0]
			u.SetValue(w.importConfig(c.upvals[i], tables, proxies))
			fn.Upvalues[i] = u
			shared[uv] = u
		}
		w.r.crons = append(w.r.crons, &cronJob{name: c.name, every: c.every, rerun: c.rerun, fn: fn})
	}
	return nil
}

// runCrons submits each cron to worker 0 every time it is due, until stop
// is closed. A cron without rerun runs once. It takes no lock and runs no
// Lua.
func (r *Router) runCrons(stop <-chan struct{}) {
	defer close(r.cronDone)
	w := r.workers[0]
	next := make([]time.Time, len(r.crons))
	jobs := append([]*cronJob(nil), r.crons...)
	now := time.Now()
	for i, j := range jobs {
		next[i] = now.Add(j.every)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for len(jobs) > 0 {
		first := 0
		for i := range next {
			if next[i].Before(next[first]) {
				first = i
			}
		}
		timer.Reset(time.Until(next[first]))
		select {
		case <-stop:
			return
		case now = <-timer.C:
		}
		for i := 0; i < len(jobs); i++ {
			if now.Before(next[i]) {
				continue
			}
			w.submit(event{kind: evCron, cron: jobs[i]}, false)
			if jobs[i].rerun {
				next[i] = now.Add(jobs[i].every)
				continue
			}
			jobs = append(jobs[:i], jobs[i+1:]...)
			next = append(next[:i], next[i+1:]...)
			i--
		}
	}
}

// scheduleReload is mcp.schedule_config_reload in a worker state: in a
// cron (where memcached's config state runs it) it asks for a reload;
// elsewhere it does nothing.
func (w *worker) scheduleReload(*glua.LState) int {
	if w.inCron && w.r.cfg.ScheduleReload != nil {
		w.r.cfg.ScheduleReload()
	}
	return 0
}

// runCron runs a cron's function in w's state, bounded by MaxRun and
// MaxAlloc; an error is logged once per distinct message. The caller
// holds the state.
func (w *worker) runCron(j *cronJob) {
	if w.r.closed.Load() {
		return
	}
	w.inCron = true
	_, err := w.callBounded(j.fn, 0)
	w.inCron = false
	w.r.cronRuns.Add(1)
	if err != nil {
		w.r.cronFails.Add(1)
		w.r.logScriptError("lua cron failed", j.name+": "+scriptMessage(err))
	}
}
