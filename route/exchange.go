package route

import (
	"sync/atomic"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
)

// Owner is told of an Exchange's progress: it is the session that reads
// the request and writes the answer.
type Owner interface {
	// Received is called as each backend reply (or routed answer) of x
	// arrives, with its size, before Answered.
	Received(x *Exchange, n int)
	// Answered is called once, when x's answer is complete.
	Answered(x *Exchange)
}

// Exchange is one client request on its way through a router and back.
// The zero Exchange is not usable: Init it once, then Reset it before each
// request.
type Exchange struct {
	// Req is the client's request.
	Req codec.Request
	// Hint numbers the client: routers keep one client's requests on one
	// socket (hint % sockets), so they stay in order.
	Hint uint32
	// Tag is the tag of the listener the client came on (a Lua pool's
	// listen_tags; "" for the pool's listen): a Lua router runs the
	// handlers attached with it.
	Tag string
	// Over is set by the session for a request whose value was still on
	// its way when its command line arrived, if the pool's router (a
	// BufferLimiter) then said its buffers were full: memcached's proxy
	// refuses such a request at its command line (buffer_memory_limit).
	Over bool
	// Batch gathers the backend calls of the session's current read; the
	// session flushes it when the read is handled. A router that sends
	// some of a read's requests without it flushes it first, on the
	// session's goroutine, so that they do not overtake the calls staged
	// before them (the Lua router does). Nil: Send and FanOut send at once.
	Batch *backend.Batch
	// Tap, when a router sets it in Route, sees each backend call's reply
	// (or failure) as it arrives, on the backend's reader goroutine, before
	// the owner is told: a router that keeps state about the keys it routes
	// (the near cache) updates it there, before the client can have the
	// reply. It must not block. Reset clears it.
	Tap func(x *Exchange, c *backend.Call)
	// TapArg is Tap's own word for this request (the near cache keeps the
	// epoch its get saw); Reset zeroes it.
	TapArg uint64
	// Pipes, when not nil, lets Send's call splice a long value rather
	// than read it (backend.Call.Splice) when nothing but the client's
	// socket reads the reply, and is the client's count of the pipes its
	// replies hold (backend.Call.Pipes), shared by its requests: the
	// owner sets it when it writes replies to a socket that takes
	// spliced ones (see BigReply).
	Pipes *atomic.Int32

	owner Owner
	out   []byte // an answer the router made (Complete)
	left  atomic.Int32

	call       backend.Call       // the one call of Send
	sentTo     *backend.Backend   // where Send sent it
	calls      []backend.Call     // the calls of FanOut
	backs      []*backend.Backend // where each of calls went, to name them to Merge
	subs       []*codec.Request
	owners     []int              // each key's index in subs, when Split made them
	split      codec.SplitScratch // the storage of subs and owners, when Split made them
	replies    []codec.Reply      // Merge's scratch
	doneFn     func(*backend.Call)
	onDoneFn   func(*backend.Call) // doneFn after SendOn's after
	after      func(*backend.Call) // SendOn's
	routed     bool                // answered through Complete
	keyTargets []int               // KeyTargets' storage
}

// Init binds x to its owner for life.
func (x *Exchange) Init(o Owner) {
	x.owner = o
	x.doneFn = x.callDone
	x.onDoneFn = x.onDone
}

// Reset readies x for a new request, keeping its storage.
func (x *Exchange) Reset() {
	x.Req.Reset()
	x.out = x.out[:0]
	x.Tap = nil
	x.TapArg = 0
	x.Over = false
}

// Clear drops what an answered and written x refers to, so that it can be
// reused; storage grown past what a usual request needs is let go.
func (x *Exchange) Clear() {
	x.routed = false
	x.Tap = nil
	x.after = nil
	x.call = backend.Call{}
	x.sentTo = nil
	clear(x.calls)
	x.calls = x.calls[:0]
	clear(x.backs)
	x.backs = x.backs[:0]
	clear(x.subs)
	x.subs = x.subs[:0]
	x.owners = nil
	clear(x.replies)
	x.replies = x.replies[:0]
	x.split.Trim(64 << 10)
	if cap(x.out) > 64<<10 {
		x.out = nil
	}
	if cap(x.Req.Buf) > 64<<10 {
		backend.PutBuffer(x.Req.Buf)
		x.Req.Buf = nil
	}
	if cap(x.Req.Keys) > 1024 {
		x.Req.Keys = nil
	}
}

// Complete answers x with out, the bytes the client sees; out may be
// reused once Complete returns.
func (x *Exchange) Complete(out []byte) {
	x.out = append(x.out, out...)
	x.routed = true
	x.owner.Received(x, len(out))
	x.owner.Answered(x)
}

// Out returns the storage an answer the proxy makes itself (a protocol
// error, a local command, a refusal) is appended to; Answer hands it back.
// Such an answer holds no backend's bytes and is not counted as received.
func (x *Exchange) Out() []byte { return x.out }

// Answer answers x with out, which must extend x.Out().
func (x *Exchange) Answer(out []byte) {
	x.out = out
	x.owner.Answered(x)
}

// Send answers x with b's reply to x.Req. The backend may rewrite x.Req
// for the socket that takes it (backend.Config.MetaRewrite): the reply is
// read alone, so the dialect gives the client its own form.
func (x *Exchange) Send(b *backend.Backend) {
	x.left.Store(1)
	x.call.Req = &x.Req
	x.call.Done = x.doneFn
	x.call.Timeout = 0
	x.call.MetaRewrite = true
	x.Forward(&x.call)
	x.sentTo = b
	x.stage(b, &x.call)
}

// Forward readies c, a call a router sends for x.Req on its own rather
// than through Send, to hand its reply back with Take: like Send's, c may
// then splice a long value, so its reply must reach x through Take.
func (x *Exchange) Forward(c *backend.Call) {
	c.Splice = x.Pipes != nil && x.Tap == nil &&
		(x.Req.Mode == codec.ModeNormal || x.Req.Mode == codec.ModeRewrite)
	c.Pipes = x.Pipes
}

// Take answers x with c's reply, c being a call a router sent for x.Req
// on its own (see Forward) and b where it went (nil when none, for x's
// record). The reply and its buffers pass to x, which writes it as it
// writes Send's: a big reply from the backend's buffer, a spliced value
// from its pipe, never a copy of either. c holds no reply afterwards.
func (x *Exchange) Take(b *backend.Backend, c *backend.Call) {
	c.MoveReply(&x.call)
	x.call.Req = &x.Req
	x.sentTo = b
	x.left.Store(1)
	x.callDone(&x.call)
}

// EachCall calls fn with each backend call x made, once answered: Send's
// or SendOn's (whose backend is nil: a dedicated socket's), or FanOut's in
// order. A request's record (package observe) reads them.
func (x *Exchange) EachCall(fn func(b *backend.Backend, c *backend.Call)) {
	if x.call.Req != nil {
		fn(x.sentTo, &x.call)
	}
	for i := range x.calls {
		var b *backend.Backend
		if i < len(x.backs) {
			b = x.backs[i]
		}
		fn(b, &x.calls[i])
	}
}

// SendOn answers x with the reply to x.Req on d, a socket dedicated to
// the client, staged in x.Batch when there is one. timeout replaces the
// backend's for this call (see backend.Call.Timeout). after, if not nil,
// runs with the call once its reply (or failure) is in, before x is
// answered, on the backend's goroutine: it must not block.
func (x *Exchange) SendOn(d *backend.Dedicated, timeout time.Duration, after func(*backend.Call)) {
	x.left.Store(1)
	x.call.Req = &x.Req
	x.call.Done = x.onDoneFn
	x.call.Timeout = timeout
	x.call.Splice = false
	x.after = after
	if x.Batch != nil {
		d.Stage(&x.call, x.Batch)
		return
	}
	d.Send(&x.call)
}

// Order makes the call SendOn sends next wait for gate before it is
// written, and call written once it is written or has failed
// (backend.Call.Gate, Written).
func (x *Exchange) Order(gate <-chan struct{}, written func()) {
	x.call.Gate, x.call.Written = gate, written
}

// onDone is the Done of SendOn's call.
func (x *Exchange) onDone(c *backend.Call) {
	if f := x.after; f != nil {
		x.after = nil
		f(c)
	}
	x.callDone(c)
}

// Split divides x.Req by backend with d.Split: targets[i] is the backend
// number of x.Req.Keys[i]. It returns the sub-requests and their backend
// numbers, to pass to FanOut; their storage is x's.
func (x *Exchange) Split(d codec.Dialect, targets []int) (subs []*codec.Request, subTargets []int) {
	subs, subTargets, x.owners = d.Split(&x.Req, targets, &x.split)
	x.subs = append(x.subs[:0], subs...)
	return x.subs, subTargets
}

// Backends numbers a router's backends for FanOut.
type Backends interface {
	// Backend returns backend number i.
	Backend(i int) *backend.Backend
}

// FanOutAll answers x with the merge of the replies of backends 0 to n-1
// of bs to x.Req itself (codec.RouteAll).
func (x *Exchange) FanOutAll(bs Backends, n int) {
	x.owners = nil
	x.subs = x.subs[:0]
	for range n {
		x.subs = append(x.subs, &x.Req)
	}
	x.FanOut(bs, nil)
}

// FanOut answers x with the merge of the replies to the sub-requests
// Split made: sub-request i goes to bs.Backend(targets[i]) (to backend i
// when targets is nil, as FanOutAll asks).
func (x *Exchange) FanOut(bs Backends, targets []int) {
	n := len(x.subs)
	if cap(x.calls) < n {
		x.calls = make([]backend.Call, n)
	}
	x.calls = x.calls[:n]
	x.backs = x.backs[:0]
	x.left.Store(int32(n))
	for i, sub := range x.subs {
		c := &x.calls[i]
		c.Req = sub
		c.Done = x.doneFn
		c.MetaRewrite = false // a merge reads the parts' replies
		t := i
		if targets != nil {
			t = targets[i]
		}
		b := bs.Backend(t)
		x.backs = append(x.backs, b)
		x.stage(b, c)
	}
}

// CallIndex returns the number of c among the calls of x's FanOut (the
// index of the sub-request it carries, the backend number for
// FanOutAll), or -1 for a call of Send: a Tap names the server by it.
func (x *Exchange) CallIndex(c *backend.Call) int {
	for i := range x.calls {
		if &x.calls[i] == c {
			return i
		}
	}
	return -1
}

// KeyTargets returns x's scratch for the backend number of each key,
// emptied; KeepKeyTargets stores it back once grown.
func (x *Exchange) KeyTargets() []int { return x.keyTargets[:0] }

// KeepKeyTargets keeps t's storage for the next KeyTargets.
func (x *Exchange) KeepKeyTargets(t []int) {
	if cap(t) <= 4096 {
		x.keyTargets = t[:0]
	}
}

func (x *Exchange) stage(b *backend.Backend, c *backend.Call) {
	if x.Batch != nil {
		b.Stage(c, x.Hint, x.Batch)
		return
	}
	b.Send(c, x.Hint)
}

// callDone is every call's Done: the last one to finish answers x.
func (x *Exchange) callDone(c *backend.Call) {
	if x.Tap != nil {
		x.Tap(x, c)
	}
	x.owner.Received(x, len(c.Reply.Raw))
	if x.left.Add(-1) == 0 {
		x.owner.Answered(x)
	}
}

// ReplyBytes is the size of what x's answer holds: the backends' replies
// and a routed answer.
func (x *Exchange) ReplyBytes() int64 {
	n := int64(len(x.call.Reply.Raw))
	for i := range x.calls {
		n += int64(len(x.calls[i].Reply.Raw))
	}
	if x.routed {
		n += int64(len(x.out))
	}
	return n
}

// ReleaseReplies recycles the backend buffers of x's replies, once they
// are written or copied.
func (x *Exchange) ReleaseReplies() {
	x.call.Release()
	for i := range x.calls {
		x.calls[i].Release()
	}
}

// minUncopiedReply is the reply size from which a backend's reply is
// written from its own buffer instead of being copied.
const minUncopiedReply = 16 << 10

// BigReply returns x's reply when it is big enough to be worth writing
// without copying, and can be: d passes a ModeNormal reply through as it
// is, and a codec.BigReplier says what goes around the data of a
// ModeRewrite one. out gets what goes before the data; tail is what
// follows it. When the reply's value was spliced, spliced holds the rest
// of the data, which goes after big, followed by spliced.After: it is not
// nil then, since only these two modes splice (Send).
func (x *Exchange) BigReply(out []byte, d codec.Dialect) (head, big []byte, spliced *backend.Spliced, tail string) {
	r := &x.call.Reply
	if len(x.subs) > 0 || x.call.Req == nil || r.Err != nil {
		return out, nil, nil, ""
	}
	if spliced = x.call.Spliced(); spliced == nil && len(r.Raw) < minUncopiedReply {
		return out, nil, nil, ""
	}
	switch x.Req.Mode {
	case codec.ModeNormal:
		return out, r.Raw, spliced, ""
	case codec.ModeRewrite:
		if br, ok := d.(codec.BigReplier); ok {
			head, big, tail = br.AppendReplyHead(out, &x.Req, r.Raw, r.Kind)
			return head, big, spliced, tail
		}
	}
	return out, nil, nil, ""
}

// AppendReply appends what the client sees of x's answer, in d's words.
// It returns how many of x's backend calls failed (each a forward error).
func (x *Exchange) AppendReply(out []byte, d codec.Dialect) ([]byte, int) {
	req := &x.Req
	switch {
	case len(x.subs) > 0:
		failed := 0
		x.replies = x.replies[:0]
		for i := range x.calls {
			x.replies = append(x.replies, x.calls[i].Reply)
			if i < len(x.backs) {
				x.replies[i].Server = x.backs[i].Name()
			}
			if x.calls[i].Reply.Err != nil {
				failed++
			}
		}
		if req.Mode == codec.ModeNoreply {
			return out, failed
		}
		return d.Merge(out, req, x.subs, x.owners, x.replies), failed
	case x.call.Req != nil:
		r := x.call.Reply
		if r.Err != nil {
			if req.Mode == codec.ModeNoreply {
				return out, 1
			}
			return d.AppendError(out, codec.ErrServer, r.Err.Error()), 1
		}
		return d.AppendReply(out, req, r.Raw, r.Kind), 0
	default:
		return append(out, x.out...), 0
	}
}
