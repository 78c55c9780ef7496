package proxy_test

import (
	"strings"
	"testing"
	"time"

	fp "shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// redisOnlyFaults are RESP framing faults beyond backendFaults.
var redisOnlyFaults = []backendFault{
	{
		name: "negative array length",
		arm: func(r *faultRig) {
			inFlight(r)
			r.fp.InjectAt(fp.Downstream, 0, []byte("*-5\r\n"))
		},
		want:      failures("parsing"),
		disarm:    clearFP,
		newSocket: true,
	},
	{
		name: "integer that is not one",
		arm: func(r *faultRig) {
			inFlight(r)
			r.fp.InjectAt(fp.Downstream, firstLen(r), []byte(":12x\r\n"))
		},
		want:      firstHit("parsing"),
		disarm:    clearFP,
		newSocket: true,
	},
}

// TestFaultBackendRedis runs backendFaults (and RESP framing faults) with
// redis-server behind the fault proxy and a Redis pool: the same promises
// as TestFaultBackend, in RESP ("-ERR backend failure: <cause>").
func TestFaultBackendRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	for _, f := range append(append([]backendFault(nil), backendFaults...), redisOnlyFaults...) {
		t.Run(strings.ReplaceAll(f.name, " ", "_"), func(t *testing.T) {
			rdB := testserver.StartRedis(t)
			for _, mode := range []struct{ name, opts string }{reloadModes[0], reloadModes[2]} {
				t.Run(strings.ReplaceAll(mode.name, " ", "_"), func(t *testing.T) {
					t.Parallel()
					runBackendFault(t, newRedisFaultRig(t, rdB, ""), f, mode.opts)
				})
			}
		})
	}
}

// TestFaultRedisErrorInPlace: a Redis error reply belongs to its command
// alone. In a pipeline, the commands around it get their replies and the
// proxy keeps its socket (unlike memcached's ERROR, a RESP error cannot
// desynchronise the stream).
func TestFaultRedisErrorInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	r := newRedisFaultRig(t, nil, "")
	r.fill()
	a := r.keysA
	c := r.dial()
	c.do(respProto.get(a[0]))
	sockets := r.fp.Accepted()
	inFlight(r)
	c.send(respProto.get(a[0]) + respCommand("INCR", a[1]) + respCommand("LPUSH", a[2], "x") + respProto.get(a[3]))
	got := []string{c.reply(), c.reply(), c.reply(), c.reply()}
	expectReplies(t, "pipeline with errors", got, []string{
		respProto.hit(a[0]),
		"-ERR value is not an integer or out of range\r\n",
		"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
		respProto.hit(a[3]),
	})
	r.fp.Clear()
	if r.fp.Accepted() != sockets {
		t.Error("the proxy recycled its socket after a Redis error reply")
	}
	r.waitHit(c, a[4], time.Second)
}
