package lua

import (
	"bytes"
	"strconv"

	glua "github.com/yuin/gopher-lua"
)

// mutator is mcp.req_mutator_new or mcp.res_mutator_new's object
// (memcached's proxy_mutator.c): called as mut(obj, args...), it rewrites
// obj, a request or a response, from its compiled steps. Each step writes
// one token; the tokens are joined by single spaces and end with "\r\n"
// (a step that copies a flag the source lacks writes nothing); valcopy
// also attaches a value. The call returns nothing, or false when a step's
// source is missing or of the wrong kind (obj is then unchanged).
//
// On a Redis pool a request mutator's tokens are the command's arguments
// (cmdset, cmdcopy, keyset, keycopy); steps about meta flags and values,
// and response mutators, have no meaning for RESP and are refused when
// made.
type mutator struct {
	res   bool // a response mutator
	redis bool
	steps []mutStep
}

type mutStepType uint8

const (
	mutCmdSet mutStepType = iota
	mutCmdCopy
	mutKeySet
	mutKeyCopy
	mutResCodeSet
	mutResCodeCopy
	mutResErr
	mutResNull
	mutFlagSet
	mutFlagCopy
	mutFlagCopyAll
	mutValCopy
)

// mutStep is a compiled step.
type mutStep struct {
	typ  mutStepType
	idx  int    // the source's position in the call's stack (obj is 2)
	str  []byte // what a set step writes
	flag byte
}

var mutSteps = map[string]stepDef[mutStepType]{
	"cmdset":      {mutCmdSet, forReq | forRedis},
	"cmdcopy":     {mutCmdCopy, forReq | forRedis},
	"keyset":      {mutKeySet, forReq | forRedis},
	"keycopy":     {mutKeyCopy, forReq | forRedis},
	"rescodeset":  {mutResCodeSet, forRes},
	"rescodecopy": {mutResCodeCopy, forRes},
	"reserr":      {mutResErr, forRes},
	"resnull":     {mutResNull, forRes},
	"flagset":     {mutFlagSet, forReq | forRes},
	"flagcopy":    {mutFlagCopy, forReq | forRes},
	"flagcopyall": {mutFlagCopyAll, forReq | forRes},
	"valcopy":     {mutValCopy, forReq | forRes},
}

// mutatorNew is mcp.req_mutator_new (res false) and mcp.res_mutator_new.
func (w *worker) mutatorNew(res bool) glua.LGFunction {
	name := map[bool]string{false: "mcp.req_mutator_new", true: "mcp.res_mutator_new"}[res]
	return func(L *glua.LState) int {
		redis := w.r.cfg.Redis
		if redis && res {
			L.RaiseError("%s has no meaning on a Redis pool: RESP replies have no meta codes or flags (return a string instead)", name)
		}
		m := &mutator{res: res, redis: redis}
		for _, a := range stepTables(L, "mutator") {
			m.steps = append(m.steps, compileMutStep(a, res, redis))
		}
		if len(m.steps) == 0 {
			L.RaiseError("mutator failed to initialize, no steps given")
		}
		ud := L.NewUserData()
		ud.Value = m
		ud.Metatable = w.v2.mutMT
		L.Push(ud)
		return 1
	}
}

func compileMutStep(a stepArgs, res, redis bool) mutStep {
	s := mutStep{typ: stepType(a, mutSteps, res, redis)}
	switch s.typ {
	case mutCmdSet:
		if s.str = a.needStr("cmd"); len(s.str) > 20 {
			a.fail("'cmd' too long")
		}
	case mutKeySet:
		if s.str = a.needStr("val"); len(s.str) == 0 {
			a.fail("'val' must have nonzero length")
		}
	case mutResCodeSet:
		s.str = a.needStr("val")
	case mutResErr:
		s.str = compileResErr(a)
	case mutFlagSet:
		s.flag = a.flag()
		v, _ := a.str("val")
		s.str = append([]byte{s.flag}, v...)
	case mutFlagCopy:
		s.flag = a.flag()
		s.idx = a.idx()
	case mutResNull, mutFlagCopyAll:
		s.idx = a.optIdx()
	default: // the copy steps
		s.idx = a.idx()
	}
	return s
}

// compileResErr returns what a reserr step writes: "CODE msg".
func compileResErr(a stepArgs) []byte {
	code, ok := a.str("code")
	if !ok {
		a.fail("must provide 'code' argument")
	}
	var word string
	switch string(code) {
	case "error":
		word = "ERROR"
	case "server":
		word = "SERVER_ERROR"
	case "client":
		word = "CLIENT_ERROR"
	default:
		a.fail("code must be 'error', server', or 'client'")
	}
	msg, ok := a.str("msg")
	if !ok {
		// memcached 1.6.45 refuses this too (its size check fails)
		a.fail("must provide 'msg' argument")
	}
	if len(msg) == 0 {
		a.fail("'msg' must be a nonzero length string")
	}
	return append([]byte(word+" "), msg...)
}

// mutRun is the state of one call.
type mutRun struct {
	L     *glua.LState
	w     *worker
	value []byte // what valcopy attaches
}

// Results of a step.
const (
	pieceOK = iota
	pieceSkip
	pieceFail
)

// arg returns the source at stack position i, and false when the call has
// no such argument.
func (r *mutRun) arg(i int) (glua.LValue, bool) {
	if i > r.L.GetTop() {
		return glua.LNil, false
	}
	return r.L.Get(i), true
}

// source returns the request or response at position i, if it is one.
func (r *mutRun) source(i int) (glua.LValue, *request, *response) {
	v, _ := r.arg(i)
	if rq, ok := userValue[*request](v); ok {
		if rq.req == nil {
			r.L.RaiseError("%s", errDetached.Error())
		}
		return v, rq, nil
	}
	res, _ := userValue[*response](v)
	return v, nil, res
}

// piece returns what step s writes: a set step its own bytes, a copy step
// what it copies from its source, a string or a request or response.
func (r *mutRun) piece(s *mutStep) ([]byte, int) {
	switch s.typ {
	case mutCmdSet, mutKeySet, mutResCodeSet, mutResErr, mutFlagSet:
		return s.str, pieceOK
	}
	v, rq, res := r.source(s.idx)
	if str, ok := v.(glua.LString); ok {
		return r.stringPiece(s, str)
	}
	return r.copyPiece(s, v, rq, res)
}

// stringPiece is what copy step s writes when its source is the string
// str: str itself, after the flag for flagcopy; resnull fails.
func (r *mutRun) stringPiece(s *mutStep, str glua.LString) ([]byte, int) {
	switch s.typ {
	case mutFlagCopy:
		return append([]byte{s.flag}, str...), pieceOK
	case mutValCopy:
		return r.valcopy([]byte(str))
	case mutResNull:
		return nil, pieceFail
	}
	return []byte(str), pieceOK
}

// copyPiece is what copy step s writes from its source v: the request rq
// or the response res (at most one is not nil), or another value.
func (r *mutRun) copyPiece(s *mutStep, v glua.LValue, rq *request, res *response) ([]byte, int) {
	switch s.typ {
	case mutCmdCopy:
		return cmdOf(rq)
	case mutKeyCopy:
		if rq != nil {
			return rq.key(), pieceOK
		}
	case mutResCodeCopy:
		return resCodeOf(res)
	case mutResNull:
		return nullReply(rq)
	case mutFlagCopy:
		return r.flagcopy(s, v, rq, res)
	case mutFlagCopyAll:
		return resFlagsOf(res)
	case mutValCopy:
		if rq != nil {
			if val := rq.value(); val != nil {
				return r.valcopy(val)
			}
		}
	}
	return nil, pieceFail
}

// resCodeOf is rescodecopy from a response: its meta reply code.
func resCodeOf(res *response) ([]byte, int) {
	if res != nil {
		if _, _, ok := metaFlagsAt(res.raw); ok {
			return res.raw[:2], pieceOK
		}
	}
	return nil, pieceFail
}

// resFlagsOf is flagcopyall from a response: every flag of its meta
// reply line.
func resFlagsOf(res *response) ([]byte, int) {
	if res != nil {
		if _, _, ok := metaFlagsAt(res.raw); ok {
			if res.parse(); res.line != nil {
				return res.line, pieceOK
			}
		}
	}
	return nil, pieceFail
}

// cmdOf is cmdcopy from a request: the line up to its key (memcached
// copies the separating space too), or a Redis request's command.
func cmdOf(rq *request) ([]byte, int) {
	if rq == nil {
		return nil, pieceFail
	}
	rq.tokenize()
	if rq.w.r.cfg.Redis && len(rq.toks) > 0 {
		return rq.token(0), pieceOK
	}
	if len(rq.toks) < 2 {
		return nil, pieceFail
	}
	return rq.req.Wire[:rq.toks[1].start], pieceOK
}

// nullReply is resnull: the reply a command gives for a missing item.
func nullReply(rq *request) ([]byte, int) {
	if rq == nil || rq.w.r.cfg.Redis {
		return nil, pieceFail
	}
	var s string
	switch rq.req.Name {
	case "mg":
		s = "EN"
	case "ms":
		s = "NS"
	case "md", "ma":
		s = "NF"
	case "get", "gets", "gat", "gats":
		s = "END"
	case "set", "cas", "add", "replace", "append", "prepend":
		s = "NOT_STORED"
	case "incr", "decr", "touch", "delete":
		s = "NOT_FOUND"
	default:
		return nil, pieceFail
	}
	return []byte(s), pieceOK
}

// flagcopy copies flag s.flag from v: nil or false write nothing, true
// the flag alone, a meta request rq or reply res its flag and token if it
// has the flag (nothing if not); anything else fails.
func (r *mutRun) flagcopy(s *mutStep, v glua.LValue, rq *request, res *response) ([]byte, int) {
	if _, present := r.arg(s.idx); !present {
		return nil, pieceFail
	}
	switch v := v.(type) {
	case *glua.LNilType:
		return nil, pieceSkip
	case glua.LBool:
		if v {
			return []byte{s.flag}, pieceOK
		}
		return nil, pieceSkip
	}
	var tok []byte
	found := false
	switch {
	case rq != nil:
		if rq.w.r.cfg.Redis || !isMeta(rq.req.Name) {
			return nil, pieceFail
		}
		var i int
		tok, i = rq.flagToken(s.flag)
		found = i >= 0
	case res != nil:
		if _, _, ok := metaFlagsAt(res.raw); !ok {
			return nil, pieceFail
		}
		tok, found = replyFlag(firstLine(res.raw), s.flag)
	default:
		return nil, pieceFail
	}
	if !found {
		return nil, pieceSkip
	}
	return append([]byte{s.flag}, tok...), pieceOK
}

// valcopy attaches val (which must end in "\r\n") and writes its length.
func (r *mutRun) valcopy(val []byte) ([]byte, int) {
	if len(val) < 2 || !bytes.HasSuffix(val, []byte("\r\n")) {
		return nil, pieceFail
	}
	r.value = val
	return strconv.AppendInt(nil, int64(len(val)-2), 10), pieceOK
}

// mutatorCall is mut(obj, args...).
func (w *worker) mutatorCall(L *glua.LState) int {
	m, ok := userValue[*mutator](L.Get(1))
	if !ok {
		L.ArgError(1, "mutator expected")
	}
	rq, res := stepObject(L, m.res, "mutator")
	run := mutRun{L: L, w: w}
	pieces := make([][]byte, 0, len(m.steps))
	total := len(m.steps) + 2
	for i := range m.steps {
		p, st := run.piece(&m.steps[i])
		switch st {
		case pieceFail:
			L.Push(glua.LFalse)
			return 1
		case pieceOK:
			pieces = append(pieces, p)
			total += len(p)
		}
	}
	if m.res {
		w.renderResponse(L, res, pieces, run.value)
	} else {
		w.renderRequest(L, rq, pieces, run.value, total)
	}
	return 0
}

// renderRequest makes pieces (and value) rq's request.
func (w *worker) renderRequest(L *glua.LState, rq *request, pieces [][]byte, value []byte, total int) {
	if rq.req == nil {
		L.RaiseError("%s", errDetached.Error())
	}
	if rq.value() != nil {
		L.RaiseError("mutator: request has already been rendered")
	}
	if total > maxRequestLine {
		L.RaiseError("mutator: new request is too long")
	}
	var buf []byte
	if w.r.cfg.Redis {
		buf = appendRESP(nil, pieces)
	} else {
		buf = bytes.Join(pieces, []byte(" "))
		buf = append(buf, "\r\n"...)
		buf = append(buf, value...)
	}
	if len(pieces) == 0 {
		L.RaiseError("mutator: failed to parse new request")
	}
	req, err := w.parse(buf)
	if err != nil {
		L.RaiseError("mutator: failed to parse new request")
	}
	rq.req, rq.owned, rq.split = req, true, false
}

// appendRESP appends args as a RESP array of bulk strings.
func appendRESP(dst []byte, args [][]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, "\r\n"...)
	for _, a := range args {
		dst = append(dst, '$')
		dst = strconv.AppendInt(dst, int64(len(a)), 10)
		dst = append(dst, "\r\n"...)
		dst = append(append(dst, a...), "\r\n"...)
	}
	return dst
}

// renderResponse makes pieces (and value) res's reply.
func (w *worker) renderResponse(L *glua.LState, res *response, pieces [][]byte, value []byte) {
	if res.raw != nil || res.err != nil {
		L.RaiseError("mutator: result has already been rendered")
	}
	line := bytes.Join(pieces, []byte(" "))
	if !replyLineOK(line) {
		L.RaiseError("mutator: failed to parse new result")
	}
	raw := make([]byte, 0, len(line)+2+len(value))
	raw = append(append(append(raw, line...), "\r\n"...), value...)
	*res = response{ud: res.ud, raw: raw, redis: res.redis, made: true, ownRaw: true} // ud: the Lua object holds it
}

// replyLineOK reports whether line starts as a reply memcached's mcmc
// parses: a number, a two-letter meta code, or a text protocol reply word.
func replyLineOK(line []byte) bool {
	word, _, _ := bytes.Cut(line, []byte(" "))
	if len(word) == 2 || len(word) > 0 && word[0] >= '0' && word[0] <= '9' {
		return true
	}
	_, code := mcCode(line)
	return code != 0
}
