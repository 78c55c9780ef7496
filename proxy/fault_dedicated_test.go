package proxy_test

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/proxy"
)

// A server killed while clients hold dedicated connections to it (blocked
// in BLPOP, inside WATCH or MULTI), beside a load of verified work: on a
// sharded pool here, on a Redis Cluster in testClusterFailover. The plain
// load is runClusterLoad's (SET/GET and MSET/MGET of each worker's own
// keys); the load of dedicated work is dedicatedLoad's.

// heldBound is how soon after a kill a client holding a dedicated
// connection to the killed server must have its error (or see its
// connection closed): far under the pool's timeout, so that a client left
// to time out fails the test.
const heldBound = 500 * time.Millisecond

// heldClient is a client holding a dedicated connection when its server
// dies. A blocked one waits for its BLPOP's reply; a pinned one sends next
// after the kill.
type heldClient struct {
	c    *respClient
	what string
	next []string // the command a pinned client sends after the kill
	// tail are commands sent after the error, with their replies: the
	// client's stream is still its own, and its transaction has ended.
	tail [][2]string
}

// holdDedicated opens clients on addr that hold dedicated connections to
// the server of keys (at least four keys, all on that server, none in use):
// two blocked in BLPOP, one watching, one inside WATCH+MULTI with a
// command queued, one inside MULTI with a command queued.
func holdDedicated(t *testing.T, addr string, keys []string) []*heldClient {
	t.Helper()
	var held []*heldClient
	for _, k := range keys[:2] {
		c := respDial(t, addr)
		c.send(multibulk("BLPOP", k, "0"))
		held = append(held, &heldClient{c: c, what: "blocked in BLPOP " + k,
			tail: [][2]string{{"RPUSH", ":1\r\n"}}}) // on a key of its own server: an error or :1 once back
	}
	pinned := []struct {
		what  string
		setup [][]string
		next  []string
	}{
		{"watching " + keys[2], [][]string{{"WATCH", keys[2]}}, []string{"GET", keys[2]}},
		{"in WATCH+MULTI on " + keys[3], [][]string{{"WATCH", keys[3]}, {"MULTI"}, {"INCR", keys[3]}}, []string{"EXEC"}},
		{"in MULTI on " + keys[2], [][]string{{"MULTI"}, {"SET", keys[2], "x"}}, []string{"EXEC"}},
	}
	for _, p := range pinned {
		c := respDial(t, addr)
		for _, cmd := range p.setup {
			if got := c.do(cmd...); got != "+OK\r\n" && got != "+QUEUED\r\n" {
				t.Fatalf("%s: %q: %q", p.what, cmd, got)
			}
		}
		held = append(held, &heldClient{c: c, what: p.what, next: p.next,
			tail: [][2]string{{"EXEC", "-ERR EXEC without MULTI\r\n"}, {"PING", "+PONG\r\n"}}})
	}
	return held
}

// checkHeld reads every held client's error after its server was killed
// at killed and returns the slowest: a blocked client's reply counts from
// the kill, a pinned client's from when it sent its next command. An error
// reply or a closed connection is fine; anything else, or no answer within
// heldBound, fails the test. A client still open must then get its own
// replies to tail.
func checkHeld(t *testing.T, held []*heldClient, killed time.Time) time.Duration {
	t.Helper()
	var slowest time.Duration
	for _, h := range held {
		from := killed
		if h.next != nil {
			if h.what[:8] == "watching" {
				h.tail[0][1] = "-ERR EXEC without MULTI\r\n"
			}
			from = time.Now()
			h.c.send(multibulk(h.next...))
		}
		h.c.nc.SetReadDeadline(from.Add(heldBound + 5*time.Second))
		got, err := readRESP(h.c.r)
		took := time.Since(from)
		slowest = max(slowest, took)
		switch {
		case err == io.EOF || err != nil && isReset(err):
			t.Logf("%s: connection closed after %v", h.what, took)
			continue
		case err != nil:
			t.Errorf("%s: %v after %v (%q)", h.what, err, took, got)
			continue
		case !strings.HasPrefix(got, "-"):
			t.Errorf("%s: %q after the kill, want an error", h.what, got)
		case took > heldBound:
			t.Errorf("%s: error %q only %v after the kill, want within %v", h.what, got, took, heldBound)
		}
		if h.next == nil {
			continue // its RPUSH waits until the server is back (checkHeldTail)
		}
		for _, c := range h.tail {
			if c[0] == "EXEC" && h.next[0] == "GET" {
				// Still watching: UNWATCH ends that (on a dead connection
				// an error, which ends it too); then EXEC has no MULTI.
				if got := h.c.do("UNWATCH"); got != "+OK\r\n" && !strings.HasPrefix(got, "-ERR backend failure") {
					t.Errorf("%s: UNWATCH after the kill: %q", h.what, got)
				}
			}
			if got := h.c.do(c[0]); got != c[1] {
				t.Errorf("%s: %s after the error: %q, want %q", h.what, c[0], got, c[1])
			}
		}
	}
	return slowest
}

// checkHeldTail sends the blocked clients' tail once their server is back:
// each gets its own reply, on the same connection.
func checkHeldTail(t *testing.T, held []*heldClient) {
	t.Helper()
	for _, h := range held {
		if h.next != nil {
			continue
		}
		key := strings.TrimPrefix(h.what, "blocked in BLPOP ")
		// A failover may lose the element; RPUSH's count is not checked.
		if got := h.c.do("RPUSH", key, "after"); !strings.HasPrefix(got, ":") {
			t.Errorf("%s: RPUSH once the server is back: %q", h.what, got)
		}
		if got, want := h.c.do("LPOP", key), bulk("after"); got != want {
			t.Errorf("%s: LPOP once the server is back: %q, want %q", h.what, got, want)
		}
	}
}

// dedicatedLoad is workers that each loop over a transaction and a
// blocking pop on keys of their own, checking every reply: WATCH k, GET k,
// MULTI, INCR k, EXEC (which must return GET's value plus one); then
// RPUSH q tag and BLPOP q 2 (which must pop one of the worker's own tags).
// An error reply allowed says is counted, and the worker RESETs (ending
// any transaction) and goes on.
type dedicatedLoad struct {
	rounds, errs, wrong, after atomic.Int64 // after: rounds done since markAfter
	markAfter                  atomic.Bool
	mu                         sync.Mutex
	samples, bad               []string
}

// runDedicatedLoad starts one worker per key pair (k, q) on addr; stop
// ends them and waits.
func runDedicatedLoad(t *testing.T, addr string, pairs [][2]string, allowed func(string) bool) (*dedicatedLoad, func()) {
	dl := &dedicatedLoad{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dl.worker(addr, w, p[0], p[1], allowed, done)
		}()
	}
	stop := sync.OnceFunc(func() { close(done); wg.Wait() })
	t.Cleanup(stop)
	return dl, stop
}

func (dl *dedicatedLoad) worker(addr string, w int, k, q string, allowed func(string) bool, done <-chan struct{}) {
	c, err := clDial(addr)
	if err != nil {
		dl.note(&dl.bad, "dial: "+err.Error())
		return
	}
	defer c.close()
	var last int64 = -1 // k's value after the last EXEC; -1: unknown (start, or after an error)
	pushed := map[string]bool{}
	is := func(want string) func(string) bool { return func(r string) bool { return r == want } }
	for round := 0; ; round++ {
		select {
		case <-done:
			return
		default:
		}
		var v int64
		tag := fmt.Sprintf("w%d-%d", w, round)
		popped := ""
		steps := []struct {
			ok   func(string) bool
			args []string
		}{
			{is("+OK\r\n"), []string{"WATCH", k}},
			{func(r string) bool {
				n, good := parseCounter(r)
				v = n
				return good && (last < 0 || n == last)
			}, []string{"GET", k}},
			{is("+OK\r\n"), []string{"MULTI"}},
			{is("+QUEUED\r\n"), []string{"INCR", k}},
			{func(r string) bool { return r == "*1\r\n:"+strconv.FormatInt(v+1, 10)+"\r\n" }, []string{"EXEC"}},
			{func(r string) bool { pushed[tag] = true; return strings.HasPrefix(r, ":") }, []string{"RPUSH", q, tag}},
			{func(r string) bool {
				for t := range pushed {
					if r == "*2\r\n"+bulk(q)+bulk(t) {
						popped = t
						return true
					}
				}
				return false
			}, []string{"BLPOP", q, "2"}},
		}
		failed := false
		for i, st := range steps {
			r, err := c.do(st.args...)
			switch {
			case err != nil:
				dl.note(&dl.bad, fmt.Sprintf("worker %d: %q: transport error (a hang or a closed connection): %v", w, st.args, err))
				return
			case st.ok(r):
				if i == 4 {
					last = v + 1
				}
				continue
			case !allowed(r):
				dl.wrong.Add(1)
				dl.note(&dl.bad, fmt.Sprintf("worker %d: %q: %q", w, st.args, r))
				return
			}
			// An allowed error: end whatever transaction is open, and
			// start the next round.
			dl.errs.Add(1)
			dl.note(&dl.samples, strings.TrimSpace(r))
			if rr, err := c.do("RESET"); err != nil || rr != "+RESET\r\n" {
				dl.note(&dl.bad, fmt.Sprintf("worker %d: RESET after an error: %q %v", w, rr, err))
				return
			}
			last, failed = -1, true
			break
		}
		delete(pushed, popped)
		if !failed {
			dl.rounds.Add(1)
			if dl.markAfter.Load() {
				dl.after.Add(1)
			}
		}
	}
}

// parseCounter reads GET's reply of a counter: nil is 0.
func parseCounter(r string) (int64, bool) {
	if r == "$-1\r\n" {
		return 0, true
	}
	lines := strings.Split(r, "\r\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "$") {
		return 0, false
	}
	n, err := strconv.ParseInt(lines[1], 10, 64)
	return n, err == nil
}

func (dl *dedicatedLoad) note(to *[]string, s string) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if len(*to) < 10 {
		*to = append(*to, s)
	}
}

// waitRounds waits until the workers have done n rounds since mark.
func (dl *dedicatedLoad) waitRounds(t *testing.T, n int64, within time.Duration, what string) {
	t.Helper()
	dl.after.Store(0)
	dl.markAfter.Store(true)
	waitFor(t, within, what, func() bool { return dl.after.Load() >= n })
}

// checkClean fails the test for a wrong reply or a transport error.
func (dl *dedicatedLoad) checkClean(t *testing.T, what string) {
	t.Helper()
	dl.mu.Lock()
	defer dl.mu.Unlock()
	t.Logf("%s: %d rounds (transaction + blocking pop), %d error replies %q", what, dl.rounds.Load(), dl.errs.Load(), dl.samples)
	if dl.wrong.Load() != 0 || len(dl.bad) != 0 {
		t.Errorf("%s: %d wrong replies, failures %q", what, dl.wrong.Load(), dl.bad)
	}
	if dl.rounds.Load() == 0 {
		t.Errorf("%s did nothing", what)
	}
}

// dedicatedGauges returns pool's dedicated_connections, pinned_clients and
// blocked_clients, as the stats port and /metrics publish them.
func dedicatedGauges(t testing.TB, srv *proxy.Server, pool string) [3]int64 {
	return [3]int64{routerStat(t, srv, pool, "dedicated_connections"), routerStat(t, srv, pool, "pinned_clients"),
		routerStat(t, srv, pool, "blocked_clients")}
}

// A server of a sharded pool killed under load, with clients blocked on
// it and inside transactions pinned to it: each of those gets its error at
// once, no client gets another's reply, the other servers' clients (plain
// and dedicated) see no error, the dedicated connections come back, and
// once the server is back blocking commands and transactions work on it
// again.
func TestRedisDedicatedServerKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  timeout: 1000\n  server_retry_timeout: 200\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	victim := servers[0]
	on := func(addrs []string, prefix string, n int) []string {
		var keys []string
		for i := 0; len(keys) < n; i++ {
			if k := prefix + strconv.Itoa(i); slices.Contains(addrs, where(k)) {
				keys = append(keys, k)
			}
		}
		return keys
	}
	survivors := []string{servers[1].Addr, servers[2].Addr}
	groups := func(keys []string, n int) [][]string {
		var g [][]string
		for len(keys) >= n {
			g, keys = append(g, keys[:n]), keys[n:]
		}
		return g
	}
	pairs := func(keys []string) [][2]string {
		var p [][2]string
		for i := 0; i+1 < len(keys); i += 2 {
			p = append(p, [2]string{keys[i], keys[i+1]})
		}
		return p
	}
	noErrors := func(string) bool { return false }
	backendFailure := func(r string) bool { return strings.HasPrefix(r, "-ERR backend failure") }
	isVictim := func(k string) bool { return where(k) == victim.Addr }

	// The load: 6 plain workers on the survivors' keys, 2 on the victim's;
	// 4 dedicated workers on each side.
	plain, stopPlain := runClusterLoad(t, addr, 6, func(w int) [][]string {
		return groups(on(survivors, fmt.Sprintf("ps%d:", w), 24), 3)
	}, noErrors, nil)
	plainV, stopPlainV := runClusterLoad(t, addr, 2, func(w int) [][]string {
		return groups(on([]string{victim.Addr}, fmt.Sprintf("pv%d:", w), 12), 3)
	}, backendFailure, isVictim)
	ded, stopDed := runDedicatedLoad(t, addr, pairs(on(survivors, "ds", 8)), noErrors)
	dedV, stopDedV := runDedicatedLoad(t, addr, pairs(on([]string{victim.Addr}, "dv", 8)), backendFailure)
	ded.waitRounds(t, 20, 10*time.Second, "dedicated load on the survivors")
	dedV.waitRounds(t, 20, 10*time.Second, "dedicated load on the victim")

	held := holdDedicated(t, addr, on([]string{victim.Addr}, "held", 4))
	live := on(survivors, "live", 1)[0]
	safe := respDial(t, addr)
	safe.send(multibulk("BLPOP", live, "0"))
	waitFor(t, 5*time.Second, "clients blocked", func() bool {
		return infoInt(t, victim.Addr, "blocked_clients") >= 2 && infoInt(t, where(live), "blocked_clients") >= 1
	})
	before := dedicatedGauges(t, srv, "rd")
	t.Logf("before the kill: dedicated_connections %d, pinned_clients %d, blocked_clients %d", before[0], before[1], before[2])
	if before[0] < int64(len(held))+1 || before[1] < 3 || before[2] < 3 {
		t.Fatalf("gauges before the kill %v: want at least %d connections, 3 pinned, 3 blocked", before, len(held)+1)
	}

	killed := time.Now()
	victim.Stop()
	slowest := checkHeld(t, held, killed)
	t.Logf("held clients: the slowest error came %v after the kill (or after its next command)", slowest.Round(time.Millisecond))
	respDial(t, addr).do("RPUSH", live, "mine")
	if got, want := safe.reply(), "*2\r\n"+bulk(live)+bulk("mine"); got != want {
		t.Fatalf("the survivor's blocked client: %q, want %q", got, want)
	}
	// Held clients done: only the dedicated workers (one connection each
	// at most) hold connections now.
	waitFor(t, 2*time.Second, "held connections given back", func() bool {
		g := dedicatedGauges(t, srv, "rd")
		return g[0] <= 8 && g[1] <= 8 && g[2] <= 8
	})
	time.Sleep(300 * time.Millisecond) // the survivors' load runs on while the server is down

	victim.Restart()
	back := time.Now()
	dedV.waitRounds(t, 20, 10*time.Second, "transactions and blocking pops on the restarted server")
	t.Logf("the restarted server served 20 dedicated rounds %v after its restart", time.Since(back).Round(time.Millisecond))
	checkHeldTail(t, held)
	stopPlain()
	stopPlainV()
	stopDed()
	stopDedV()
	waitFor(t, 2*time.Second, "dedicated gauges back to 0", func() bool { return dedicatedGauges(t, srv, "rd") == [3]int64{} })

	ded.checkClean(t, "dedicated load on the survivors")
	if ded.errs.Load() != 0 {
		t.Errorf("the survivors' dedicated load got %d error replies", ded.errs.Load())
	}
	dedV.checkClean(t, "dedicated load on the victim")
	plain.mu.Lock()
	defer plain.mu.Unlock()
	t.Logf("plain load on the survivors: %d requests, %d errors; on the victim: %d requests, %d errors, %d writes lost by the restart",
		plain.ops.Load(), plain.errs.Load(), plainV.ops.Load(), plainV.errs.Load(), plainV.lost.Load())
	if plain.errs.Load() != 0 || plain.wrong.Load() != 0 || len(plain.badErr) != 0 {
		t.Errorf("the survivors' plain load: %d errors, %d wrong: %q %q", plain.errs.Load(), plain.wrong.Load(), plain.errSamples, plain.badErr)
	}
	plainV.mu.Lock()
	defer plainV.mu.Unlock()
	if plainV.wrong.Load() != 0 || len(plainV.badErr) != 0 {
		t.Errorf("the victim's plain load: %d wrong: %q", plainV.wrong.Load(), plainV.badErr)
	}
}
