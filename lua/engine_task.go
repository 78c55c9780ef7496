package lua

import (
	"bytes"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/backend"
	"shardproxy/codec"
)

// taskState says where a task's coroutine stands.
type taskState uint8

const (
	taskRunning taskState = iota // running, or not started
	taskWaiting                  // yielded in pool(r) or mcp.await
	taskDone                     // the handler returned
)

// task is one request running through a handler.
type task struct {
	prev  *task // in the worker's list of active tasks
	next  *task
	req   *codec.Request // what the handler sees: the client's request or one key of a multi-get
	hint  uint32
	c     Completion // nil for a multi-get's sub-request
	multi *multi     // the multi-get this sub-request belongs to
	idx   int        // index in multi
	rq    *request   // the request object handed to the handler
	co    *coroutine
	aw    *await // what the coroutine waits for
	rc    *rctx  // V2: the request context running the handler (v2_rctx.go)
	// V2: for a sub-generator's task (v2_subgen.go), the context and slot its
	// result goes to; it has no Completion.
	parent       *rctx
	parentHandle int
	fast         bool // a multi-get's key routed without entering Lua (see direct_v1.go)
	state        taskState
	calls        int   // backend calls made so far
	bytes        int64 // buffer memory accounted to the request
}

// multi is a memcache multi-get (or a Redis multi-key command), split into
// one request per key that each run the handler, as memcached's proxy
// does; the replies are merged in the client's key order.
type multi struct {
	req     *codec.Request
	c       Completion
	subs    []*codec.Request
	owners  []int
	replies []codec.Reply
	left    int
	bytes   int64
}

// startRequest runs the handler for a client request.
func (w *worker) startRequest(req *codec.Request, hint uint32, c Completion, bt *backend.Batch) {
	bytes := int64(len(req.Wire))
	// A part of a long multi-get (codec.PartParser) is one even with one
	// key: its key too long is answered in place too.
	if req.Route == codec.RouteMulti && len(req.Keys) > 1 || req.Part != codec.PartWhole && len(req.Keys) == 1 {
		targets := make([]int, len(req.Keys))
		for i := range targets {
			targets[i] = i
		}
		if subs, _, owners := w.r.cfg.Dialect.Split(req, targets, nil); len(subs) > 1 || len(subs) == 1 && req.Part != codec.PartWhole {
			if bt != nil { // its keys are sent at once, after what is staged
				bt.Flush()
			}
			m := &multi{req: req, c: c, subs: subs, owners: owners, replies: make([]codec.Reply, len(subs)), left: len(subs), bytes: bytes}
			for i, sub := range subs {
				if w.keyTooLong(sub) {
					m.replies[i] = codec.Reply{Raw: []byte(replyKeyTooLong)}
					w.subDone(m)
					continue
				}
				w.startTask(sub, hint, nil, m, i, 0, nil)
			}
			return
		}
	}
	w.startTask(req, hint, c, nil, 0, bytes, bt)
}

// startTask runs the handler attached for req's command in a coroutine,
// or, for a direct handler, sends req straight to its backend (staged in
// bt when it is not nil). Anything else flushes bt first: it sends at once.
func (w *worker) startTask(req *codec.Request, hint uint32, c Completion, m *multi, idx int, bytes int64, bt *backend.Batch) {
	hook := w.hooks.lookup(req, w.r.cfg.Redis, w.tag)
	fn, rc, startErr := w.startV2(hook, req) // a function generator's: its rctx's handler
	if fn != nil && rc == nil && m == nil && w.sendDirect(fn, req, hint, c, bytes, bt) {
		return
	}
	if rc != nil && m == nil && w.sendDirectV2(hook, rc, req, hint, c, bytes, bt) {
		return
	}
	if bt != nil {
		bt.Flush()
	}
	t := w.newTask()
	t.req, t.hint, t.c, t.multi, t.idx, t.bytes = req, hint, c, m, idx, bytes
	w.activate(t)
	if startErr != nil {
		w.finish(t, glua.LNil, startErr)
		return
	}
	if rc != nil {
		rc.serve(t)
	}
	if fn == nil {
		if w.r.internal != nil { // memcached serves it from its storage
			w.finishReply(t, w.r.internalReply(req))
			return
		}
		w.finish(t, glua.LNil, wireError("no route for command "+req.Name))
		return
	}
	if w.routeDirect(t, fn) {
		return
	}
	w.runHandler(t, fn, &request{w: w, req: req})
}

// activate puts t on the list of active tasks.
func (w *worker) activate(t *task) {
	t.next = w.active
	if t.next != nil {
		t.next.prev = t
	}
	w.active = t
}

// runHandler runs fn, a handler, for t in a coroutine, with rq as its
// request object.
func (w *worker) runHandler(t *task, fn *glua.LFunction, rq *request) {
	t.rq = rq
	ud := &rq.ud // as L.NewUserData makes it, in rq's allocation
	*ud = glua.LUserData{Value: rq, Env: w.L.Env, Metatable: w.reqMT}
	t.co = w.getCoroutine()
	w.run(t, fn, ud)
}

func (w *worker) newTask() *task {
	if n := len(w.taskFree); n > 0 {
		t := w.taskFree[n-1]
		w.taskFree = w.taskFree[:n-1]
		return t
	}
	return &task{}
}

// finish answers t with the handler's result v, or with failure when it
// is set, and recycles t.
func (w *worker) finish(t *task, v glua.LValue, failure error) {
	if aw := t.aw; aw != nil && !aw.completed { // stopped while waiting
		t.aw = nil
		aw.completed = true
		if aw.borrowed && aw.pending > 0 {
			// A call still uses the client's request, which is the client's
			// again once answered: answer when the call returns.
			aw.hold, aw.holdV, aw.holdErr = true, v, failure
			return
		}
		aw.t = nil
		if aw.pending == 0 {
			w.putAwait(aw)
		}
	}
	// The answer is made before retiring t: retiring frees its request
	// context, which empties the responses it owns (rctx:response_new).
	var reply codec.Reply
	var out []byte
	switch {
	case t.parent != nil:
		v = w.childResult(v)
	case t.multi != nil:
		reply = w.toReply(t.req, v, failure)
	default:
		out = w.appendResult(w.out[:0], t.req, v, failure)
	}
	w.retire(t)
	switch {
	case t.parent != nil:
		w.childDone(t, v, failure)
	case t.multi != nil:
		m := t.multi
		m.replies[t.idx] = reply
		w.subDone(m)
	default:
		w.complete(t, out)
	}
	if failure != nil {
		w.r.failures.Add(1)
	}
	w.recycle(t)
}

// finishReply answers t, routed without entering Lua, with its backend's
// reply, and recycles t.
func (w *worker) finishReply(t *task, reply codec.Reply) {
	w.retire(t)
	if m := t.multi; m != nil {
		if reply.Err != nil {
			reply.Err = w.r.clientWords(reply.Err)
		}
		m.replies[t.idx] = reply
		w.subDone(m)
	} else {
		w.complete(t, w.r.appendReply(w.out[:0], t.req, reply))
	}
	w.recycle(t)
}

// retire takes t off the list of active tasks and detaches its request
// object.
func (w *worker) retire(t *task) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.active = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	if t.rq != nil {
		t.rq.detach()
	}
	if t.rc != nil {
		w.rctxRetire(t.rc)
	}
}

// complete hands the client its reply.
func (w *worker) complete(t *task, out []byte) {
	w.r.settle(t.bytes)
	t.c.Complete(out)
	w.out = out[:0]
	if cap(w.out) > 64<<10 {
		w.out = nil
	}
}

// subDone counts a finished key of a multi-get.
func (w *worker) subDone(m *multi) {
	m.left--
	if m.left == 0 {
		w.completeMulti(m)
	}
}

// recycle keeps t for reuse.
func (w *worker) recycle(t *task) {
	*t = task{}
	if len(w.taskFree) < 4096 {
		w.taskFree = append(w.taskFree, t)
	}
}

// replyKeyTooLong answers a multi-get's key over the key limit in its
// place, as memcached's proxy does; the other keys are answered as usual.
const replyKeyTooLong = "CLIENT_ERROR key too long\r\n"

// mcKeyMax is memcached's KEY_MAX_LENGTH, the key limit where
// Config.Options.MaxKey leaves it unset.
const mcKeyMax = 250

// keyTooLong reports whether sub, one key of a memcache multi-get, has a
// key over the pool's limit (the parser lets such keys through to be
// answered in place: codec.Options.ProxyErrors).
func (w *worker) keyTooLong(sub *codec.Request) bool {
	if w.r.cfg.Redis || len(sub.Keys) != 1 {
		return false
	}
	limit := w.r.cfg.Options.MaxKey
	if limit <= 0 {
		limit = mcKeyMax
	}
	return len(sub.Keys[0]) > limit
}

// completeMulti merges a multi-get's replies and answers the client.
func (w *worker) completeMulti(m *multi) {
	d := w.r.cfg.Dialect
	if w.r.cfg.Redis {
		w.out = d.Merge(w.out[:0], m.req, m.subs, m.owners, m.replies)
	} else {
		w.out = w.mergeInPlace(w.out[:0], m)
	}
	w.r.settle(m.bytes)
	m.c.Complete(w.out)
}

// mergeInPlace answers a memcache multi-get as memcached's proxy does:
// each key's answer in its place, in the client's order, without its
// "END" (a hit's VALUE block, nothing for a miss, an error line for a
// failure, a handler's string as it is), then one "END". One failed key
// fails no other.
func (w *worker) mergeInPlace(dst []byte, m *multi) []byte {
	d := w.r.cfg.Dialect
	for _, j := range m.owners {
		if uint(j) >= uint(len(m.replies)) {
			continue
		}
		r := m.replies[j]
		if r.Err != nil {
			dst = d.AppendError(dst, codec.ErrServer, r.Err.Error())
			continue
		}
		dst = append(dst, bytes.TrimSuffix(r.Raw, []byte("END\r\n"))...)
	}
	return append(dst, "END\r\n"...)
}

// appendResult appends what the client sees for req when its handler
// returned v (or failed): a response's reply, a string as it is, or an
// error. A noreply request shows nothing, whatever happened.
func (w *worker) appendResult(dst []byte, req *codec.Request, v glua.LValue, failure error) []byte {
	if req.Mode == codec.ModeNoreply {
		return dst
	}
	d := w.r.cfg.Dialect
	if failure != nil {
		return d.AppendError(dst, codec.ErrServer, failure.Error())
	}
	switch v := v.(type) {
	case glua.LString:
		return append(dst, v...)
	case *glua.LUserData:
		if res, ok := v.Value.(*response); ok {
			if res.made { // as memcached: sent as it is, nothing when empty
				return append(dst, res.raw...)
			}
			if res.err != nil {
				return d.AppendError(dst, res.errKind, w.r.clientWords(res.err).Error())
			}
			res.hdr.request(&w.hdr)
			return d.AppendReply(dst, &w.hdr, res.raw, res.kind)
		}
	}
	return d.AppendError(dst, codec.ErrServer, errBadResponse.Error())
}

// toReply turns a sub-request's result into the reply Merge expects.
func (w *worker) toReply(req *codec.Request, v glua.LValue, failure error) codec.Reply {
	if failure != nil {
		return codec.Reply{Err: failure}
	}
	if ud, ok := v.(*glua.LUserData); ok {
		if res, ok := ud.Value.(*response); ok && res.made {
			v = glua.LString(res.raw)
		}
	}
	switch v := v.(type) {
	case glua.LString:
		raw := []byte(v)
		kind := codec.ReplyOK
		if _, k, err := w.r.cfg.Dialect.ParseReply(raw, req); err == nil {
			kind = k
		}
		if w.r.v1 && !w.r.cfg.Redis {
			// memcached 1.6.22 sent a V1 handler's string in a multi-get
			// as it is, its END too; mergeInPlace drops one END.
			raw = append(raw, "END\r\n"...)
		}
		return codec.Reply{Raw: raw, Kind: kind}
	case *glua.LUserData:
		if res, ok := v.Value.(*response); ok {
			if res.err != nil {
				return codec.Reply{Err: w.r.clientWords(res.err)}
			}
			return codec.Reply{Raw: res.raw, Kind: res.kind}
		}
	}
	return codec.Reply{Err: errBadResponse}
}
