package cluster

import (
	"bytes"
	"errors"
	"strings"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
)

// op is one request (a client's, or one slot's part of a split one) on its
// way through the cluster: sent, maybe redirected or retried, answered. It
// lives from newOp to finish; its call is sent again from the call's own
// Done, never waiting.
type op struct {
	c         *Cluster
	req       *codec.Request
	slot      int   // -1: no key; any master
	fixed     *node // RouteAll: this master
	hint      uint32
	read      bool  // may go to a replica
	next      *node // the next send goes here: a MOVED or ASK target
	asking    bool  // the next send (or the call in flight) is an ASKING pair
	redirects int
	tryagains int
	node      *node // where the call in flight went
	call      backend.Call
	askReq    codec.Request // storage of the ASKING pair

	done   Completer // a client request's
	parent *fanout   // a split request's part
	idx    int
}

// newOp takes an op from the pool.
func (c *Cluster) newOp(req *codec.Request, slot int, hint uint32, read bool) *op {
	o := c.ops.Get().(*op)
	o.req, o.slot, o.hint, o.read = req, slot, hint, read
	return o
}

// release returns o to the pool, keeping its Done and ASKING storage.
func (o *op) release() {
	buf := o.askReq.Buf[:0]
	if cap(buf) > 64<<10 {
		buf = nil
	}
	done := o.call.Done
	*o = op{c: o.c, askReq: codec.Request{Buf: buf}}
	o.call.Done = done
	o.c.ops.Put(o)
}

// send picks the node for o (the redirect target, else by the table) and
// queues the call. Nothing may touch o after Send: the call may complete,
// and o be reused, before Send returns.
func (o *op) send() {
	c := o.c
	n := o.next
	o.next = nil
	if n == nil {
		t := c.tab.Load()
		if t == nil {
			c.park(o)
			return
		}
		var down bool
		var msg string
		if n, down, msg = t.pick(o, c.cfg.ReadFrom); n == nil {
			if down {
				o.finishDown(msg)
			} else {
				o.finishError(msg)
			}
			return
		}
	}
	o.node = n
	o.call.Req = o.req
	if o.asking {
		setAsking(&o.askReq, o.req)
		o.call.Req = &o.askReq
	}
	n.inflight.Add(1)
	n.b.Send(&o.call, o.hint)
}

// pick returns the node for o by the table, or why there is none (down:
// the answer is -CLUSTERDOWN, as Redis answers for an unserved slot).
func (t *table) pick(o *op, rf ReadFrom) (n *node, down bool, msg string) {
	if o.fixed != nil {
		return o.fixed, false, ""
	}
	if o.slot < 0 {
		if len(t.masters) == 0 {
			return nil, true, "no master serves any slot"
		}
		return t.masters[int(o.hint)%len(t.masters)], false, ""
	}
	i := t.owner[o.slot]
	if i < 0 {
		return nil, true, "Hash slot not served"
	}
	s := &t.shards[i]
	if o.read && rf != ReadMaster {
		if r := s.replica(o.hint); r != nil {
			return r, false, ""
		}
		if rf == ReadReplica {
			return nil, false, "no healthy replica serves slot " + slotText(o.slot) + " (read_from: replica)"
		}
	}
	return s.master, false, ""
}

// onDone is the call's Done: it runs on a backend goroutine (or on the
// sender's when the call fails at once) and must not block.
func (o *op) onDone(call *backend.Call) {
	n := o.node
	n.inflight.Add(-1)
	asking := o.asking
	o.asking = false
	r := call.Reply
	if r.Err != nil {
		o.failed(n, r.Err)
		return
	}
	raw := r.Raw
	if asking {
		rest, err := splitAsking(raw)
		if err != nil {
			o.finishError("node " + n.addr + ": " + err.Error() + ": " + firstLine(raw))
			return
		}
		raw = rest
	}
	if r.Kind == codec.ReplyError && o.redirect(n, raw) {
		return
	}
	o.finishRaw(raw)
}

// redirect acts on a cluster error reply: it follows MOVED (updating the
// map) and ASK, retries TRYAGAIN after a pause, and asks for a refresh on
// CLUSTERDOWN. It returns false when the reply goes to the client as it
// is: any other error, a malformed redirect, a retry limit reached.
func (o *op) redirect(n *node, raw []byte) bool {
	c := o.c
	switch {
	case bytes.HasPrefix(raw, movedPrefix) || bytes.HasPrefix(raw, askPrefix):
		re, ok := ParseRedirect(raw, n.addr)
		if !ok {
			c.stats.badRedirect.Add(1)
			return false
		}
		if o.redirects >= c.cfg.MaxRedirects {
			c.stats.redirectLimit.Add(1)
			o.finishError("too many cluster redirects for slot " + slotText(re.Slot) + " (last: " + firstLine(raw) + ")")
			return true
		}
		o.redirects++
		if re.Ask {
			c.stats.ask.Add(1)
			n.b.Stats().Ask.Add(1)
			o.next, o.asking = c.nodeAt(re.Addr), true
		} else {
			c.stats.moved.Add(1)
			n.b.Stats().Moved.Add(1)
			o.next = c.moved(re.Slot, re.Addr)
		}
		o.send()
		return true
	case bytes.HasPrefix(raw, tryAgainPrefix):
		if o.tryagains >= c.cfg.TryAgain {
			return false
		}
		o.tryagains++
		c.stats.tryAgain.Add(1)
		n.b.Stats().TryAgain.Add(1)
		time.AfterFunc(tryAgainDelay(o.tryagains), o.send)
		return true
	case bytes.HasPrefix(raw, clusterDownPrefix):
		c.stats.clusterDown.Add(1)
		c.Refresh()
	}
	return false
}

// tryAgainDelay is the pause before the n-th TRYAGAIN retry: 5ms,
// doubling, at most maxTryAgainDelay.
func tryAgainDelay(n int) time.Duration {
	d := 5 * time.Millisecond << min(n-1, 8)
	return min(d, maxTryAgainDelay)
}

// failed handles a call that got no reply. A call to a node closed because
// it left the map was never sent: it goes again by the current table; so
// does a read under ReadPreferReplica that a replica could not take (it
// was not connected, or marked bad), to the master. Any other failure is
// answered, and the map read again: the node may have failed over. A
// request that may have been executed is never sent twice.
func (o *op) failed(n *node, err error) {
	c := o.c
	var be *backend.Error
	if errors.As(err, &be) && !c.closed.Load() && o.redirects < c.cfg.MaxRedirects {
		unsent := be.Cause == backend.CauseConnecting || be.Cause == backend.CauseMarkedBad
		switch {
		case be.Cause == backend.CauseClosed:
			o.redirects++
			o.send()
			return
		case unsent && n.replica && c.cfg.ReadFrom == ReadPreferReplica:
			// A read a replica could not take goes to the master.
			c.Refresh()
			o.redirects++
			o.read = false
			o.send()
			return
		}
	}
	c.Refresh()
	o.finishError("node " + n.addr + ": " + err.Error())
}

// finishError answers o with "-ERR <msg>".
func (o *op) finishError(msg string) {
	o.c.stats.failed.Add(1)
	o.finishRaw(o.c.dialect.AppendError(nil, codec.ErrServer, msg))
}

// finishDown answers o with "-CLUSTERDOWN <msg>".
func (o *op) finishDown(msg string) {
	o.c.stats.failed.Add(1)
	o.finishRaw(appendClusterDown(nil, msg))
}

// finishRaw answers o with a whole reply. A split request's part hands it
// to the fan-out (an error reply fails the whole request, as Merge does).
func (o *op) finishRaw(raw []byte) {
	c := o.c
	if f := o.parent; f != nil {
		i := o.idx
		kind := codec.ReplyOK
		if len(raw) > 0 && raw[0] == '-' {
			kind = codec.ReplyError
		}
		server := ""
		if n := o.node; n != nil {
			server = n.addr
		} else if n := o.fixed; n != nil {
			server = n.addr
		}
		o.release()
		f.reply(i, codec.Reply{Raw: raw, Kind: kind, Server: server})
		return
	}
	if o.req.Mode == codec.ModeRewrite { // SCAN: the proxy's cursor
		kind := codec.ReplyOK
		if len(raw) > 0 && raw[0] == '-' {
			kind = codec.ReplyError
		}
		raw = c.dialect.AppendReply(nil, o.req, raw, kind)
	}
	done := o.done
	o.release()
	done.Complete(raw)
	c.inflight.Add(-1)
}

// park keeps o until the first slot map arrives, or the first refresh
// fails.
func (c *Cluster) park(o *op) {
	c.mu.Lock()
	if c.tab.Load() != nil {
		c.mu.Unlock()
		o.send()
		return
	}
	if reason := c.lastErr; reason != "" || c.closed.Load() || len(c.parked) >= maxParked {
		// Only the first refresh is waited for: once one has failed,
		// requests are answered at once while the refresher keeps trying.
		c.mu.Unlock()
		msg := "shardproxy has no cluster slot map yet"
		if reason != "" {
			msg = "shardproxy has no cluster slot map: " + reason
		}
		o.finishDown(msg)
		c.Refresh()
		return
	}
	c.parked = append(c.parked, o)
	c.mu.Unlock()
	c.Refresh()
}

// firstLine returns a reply's first line without its line end, for messages.
func firstLine(raw []byte) string {
	line, _, _ := bytes.Cut(raw, []byte("\r\n"))
	if len(line) > 0 && (line[0] == '-' || line[0] == '+') {
		line = line[1:]
	}
	if len(line) > 128 {
		line = line[:128]
	}
	return strings.ToValidUTF8(string(line), "?")
}
