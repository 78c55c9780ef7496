package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"
)

// inspector is mcp.req_inspector_new or mcp.res_inspector_new's object
// (memcached's proxy_inspector.c): called as ins(obj), it returns what its
// compiled steps find in obj, each step's values in order: sepkey (a key
// component, or what map gives for it), keybegin and keyis (booleans),
// hasflag (a boolean), flagtoken, flagint and flagis (whether the flag is
// there, then its token, its integer or whether it equals str; nil when it
// is absent).
//
// On a Redis pool the key steps read the first key; the flag steps, and
// response inspectors, have no meaning for RESP and are refused when made.
type inspector struct {
	res   bool
	steps []insStep
}

type insStepType uint8

const (
	insSepKey insStepType = iota
	insKeyBegin
	insKeyIs
	insHasFlag
	insFlagToken
	insFlagInt
	insFlagIs
)

// insStep is a compiled step.
type insStep struct {
	typ  insStepType
	flag byte
	str  []byte
	sep  byte
	pos  int
	m    *glua.LTable // sepkey's map
}

var insSteps = map[string]stepDef[insStepType]{
	"sepkey":    {insSepKey, forReq | forRedis},
	"keybegin":  {insKeyBegin, forReq | forRedis},
	"keyis":     {insKeyIs, forReq | forRedis},
	"hasflag":   {insHasFlag, forReq | forRes},
	"flagtoken": {insFlagToken, forReq | forRes},
	"flagint":   {insFlagInt, forReq | forRes},
	"flagis":    {insFlagIs, forReq | forRes},
}

// inspectorNew is mcp.req_inspector_new (res false) and
// mcp.res_inspector_new.
func (w *worker) inspectorNew(res bool) glua.LGFunction {
	name := map[bool]string{false: "mcp.req_inspector_new", true: "mcp.res_inspector_new"}[res]
	return func(L *glua.LState) int {
		redis := w.r.cfg.Redis
		if redis && res {
			L.RaiseError("%s has no meaning on a Redis pool: RESP replies have no meta flags", name)
		}
		ins := &inspector{res: res}
		for _, a := range stepTables(L, "inspector") {
			ins.steps = append(ins.steps, compileInsStep(a, res, redis))
		}
		ud := L.NewUserData()
		ud.Value = ins
		ud.Metatable = w.v2.insMT
		L.Push(ud)
		return 1
	}
}

func compileInsStep(a stepArgs, res, redis bool) insStep {
	s := insStep{typ: stepType(a, insSteps, res, redis)}
	switch s.typ {
	case insSepKey:
		s.sep, s.pos = '/', 1
		if sep, ok := a.str("sep"); ok {
			if len(sep) != 1 {
				a.fail("separator must be one character")
			}
			s.sep = sep[0]
		}
		switch v := a.t.RawGetString("pos").(type) {
		case glua.LNumber:
			if glua.LNumber(int(v)) == v {
				s.pos = int(v)
			} else {
				s.pos = 0 // as Lua 5.4's lua_tointeger: no component
			}
		case *glua.LNilType:
		default:
			a.fail("'pos' must be a number")
		}
		switch v := a.t.RawGetString("map").(type) {
		case *glua.LTable:
			s.m = v
		case *glua.LNilType:
		default:
			a.fail("'map' must be a table")
		}
	case insKeyBegin, insKeyIs:
		if s.str = a.needStr("str"); len(s.str) == 0 {
			a.fail("'str' must have nonzero length")
		}
	case insFlagIs:
		s.flag = a.flag()
		if s.str = a.needStr("str"); len(s.str) == 0 {
			a.fail("'str' must have nonzero length")
		}
	default:
		s.flag = a.flag()
	}
	return s
}

// inspectorCall is ins(obj).
func (w *worker) inspectorCall(L *glua.LState) int {
	ins, ok := userValue[*inspector](L.Get(1))
	if !ok {
		L.ArgError(1, "inspector expected")
	}
	rq, res := stepObject(L, ins.res, "inspector")
	if rq != nil && rq.req == nil {
		L.RaiseError("%s", errDetached.Error())
	}
	n := 0
	for i := range ins.steps {
		n += ins.steps[i].run(L, rq, res)
	}
	return n
}

// find returns the token of the step's flag in the request rq or, when rq
// is nil, in the meta reply res, and whether the flag is there. A reply
// that is not meta has no flags; hasflag raises an error for it.
func (s *insStep) find(L *glua.LState, rq *request, res *response) ([]byte, bool) {
	if rq != nil {
		tok, i := rq.flagToken(s.flag)
		return tok, i >= 0
	}
	if _, _, ok := metaFlagsAt(res.raw); !ok {
		if s.typ == insHasFlag {
			L.RaiseError("inspector error: response is not meta protocol")
		}
		return nil, false
	}
	return replyFlag(firstLine(res.raw), s.flag)
}

// run pushes the step's values and returns how many.
func (s *insStep) run(L *glua.LState, rq *request, res *response) int {
	switch s.typ {
	case insSepKey:
		part := sepKey(rq.key(), s.sep, s.pos)
		switch {
		case part == nil:
			L.Push(glua.LNil)
		case s.m != nil:
			L.Push(s.m.RawGetString(string(part)))
		default:
			L.Push(glua.LString(part))
		}
		return 1
	case insKeyBegin:
		key := rq.key()
		L.Push(glua.LBool(len(s.str) < len(key) && bytes.HasPrefix(key, s.str)))
		return 1
	case insKeyIs:
		L.Push(glua.LBool(bytes.Equal(rq.key(), s.str)))
		return 1
	}
	tok, found := s.find(L, rq, res)
	if s.typ == insHasFlag {
		L.Push(glua.LBool(found))
		return 1
	}
	if !found {
		L.Push(glua.LFalse)
		L.Push(glua.LNil)
		return 2
	}
	L.Push(glua.LTrue)
	switch s.typ {
	case insFlagToken:
		L.Push(glua.LString(tok))
	case insFlagInt:
		if v, err := tokenInt(tok); err == errTokOK && len(tok) > 0 {
			L.Push(glua.LNumber(v))
		} else {
			L.Push(glua.LNil)
		}
	case insFlagIs:
		L.Push(glua.LBool(bytes.Equal(tok, s.str)))
	}
	return 2
}

// sepKey returns the pos-th component of key split at sep (leading
// separators skipped, an empty component counted), or nil when there is
// none or it is empty; memcached's sepkey.
func sepKey(key []byte, sep byte, pos int) []byte {
	i := 0
	for i < len(key) && key[i] == sep {
		i++
	}
	start := i
	for ; i < len(key); i++ {
		if key[i] != sep {
			continue
		}
		pos--
		if pos == 0 {
			return nonEmpty(key[start:i])
		}
		start = i + 1
	}
	if pos == 1 {
		return nonEmpty(key[start:])
	}
	return nil
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
