// Desync scenarios the fault harness found as bugs, now fixed: a stray
// reply or a backend that misread the stream must never hand a reply to
// the wrong request.
package proxy_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	fp "shardproxy/internal/faultproxy"
)

// ownReplyOrError fails t for every reply that is neither get keys[i]'s
// own value, a miss, an error the backend sent (allowed), nor a backend
// failure naming a cause: above all, never another key's value.
func ownReplyOrError(t *testing.T, keys, got []string, allowed ...string) {
	t.Helper()
	for i, k := range keys {
		g := at(got, i)
		switch {
		case g == hit(k), g == "END\r\n", strings.HasPrefix(g, "SERVER_ERROR backend failure: "):
		case slices.Contains(allowed, g):
		default:
			t.Errorf("get %s got %q: another request's reply", k, g)
		}
	}
}

// TestFaultExtraReplyShiftsGets: a backend sends one complete reply too
// many ("END\r\n" between the replies to pipelined gets). Every later get
// on that socket is then answered with the reply to the get before it:
// "get key-2" returns "VALUE key-1 ...". The proxy frames a single-server
// retrieval reply (memcache.parseRetrieval) without checking that the
// VALUE keys are the requested ones, in order; had it checked, the shifted
// reply would fail with "parsing" and the socket would be recycled.
// (Split multi-gets do check keys, in mergeValues.)
func TestFaultExtraReplyShiftsGets(t *testing.T) {
	r := newFaultRig(t, nil, "")
	r.fill()
	a := r.keysA
	c := dial(t, r.addr)
	c.do("get " + a[0] + "\r\n")
	inFlight(r)
	r.fp.InjectAt(fp.Downstream, int64(len(hit(a[0]))), []byte("END\r\n"))
	keys := []string{a[0], a[1], a[2], a[3]}
	c.send(gets(keys...))
	got := c.replies(len(keys))
	t.Logf("replies: %q", got)
	ownReplyOrError(t, keys, got)
}

// TestFaultBackendErrorDropsSocket: the backend answers "ERROR" to bytes
// the proxy did not send as a request of its own (here garbage injected
// into the request stream; in life, any request the server frames
// differently from the proxy). The proxy treats ERROR / CLIENT_ERROR as
// "an error for this request alone, connection in sync" (codec.ReplyError)
// and keeps the socket, so the rest of the pipeline is answered one reply
// late: "get key-1" returns "VALUE key-0 ...". memcached's own proxy closes
// the backend connection after CLIENT_ERROR and ERROR for exactly this
// reason (reliability.md §3 item 11); the requests queued behind would then
// fail with a cause instead of taking their neighbours' replies.
func TestFaultBackendErrorDropsSocket(t *testing.T) {
	r := newFaultRig(t, nil, "")
	r.fill()
	a := r.keysA
	c := dial(t, r.addr)
	c.do("get " + a[0] + "\r\n")
	inFlight(r)
	r.fp.InjectAt(fp.Upstream, 0, []byte("bogus\r\n"))
	keys := []string{a[0], a[1], a[2]}
	c.send(gets(keys...))
	got := c.replies(len(keys))
	t.Logf("replies: %q", got)
	ownReplyOrError(t, keys, got, "ERROR\r\n")
}

// TestFaultConnectBoundedByTimeout: with connect_timeout longer than
// timeout, a request that needs a new socket fails at its own deadline
// ("timeout"), while the connect goes on for the requests after it. (It
// used to wait out the whole connect timeout.)
func TestFaultConnectBoundedByTimeout(t *testing.T) {
	r := newFaultRig(t, nil, "  timeout: 300\n  connect_timeout: 1500\n")
	r.fp.Blackhole(fp.Downstream, true) // accepts, never answers
	c := r.dial()
	start := time.Now()
	got := c.do("get " + r.keysA[0] + "\r\n")
	took := time.Since(start)
	t.Logf("%q after %v", got, took)
	if got != "SERVER_ERROR backend failure: timeout\r\n" {
		t.Errorf("got %q, want the request's own timeout", got)
	}
	if took > 300*time.Millisecond+300*time.Millisecond {
		t.Errorf("a request with a 300ms timeout waited %v for a connect", took)
	}
}
