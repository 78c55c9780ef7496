package cluster

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

func seedsOf(fc *fakeCluster) []string {
	var s []string
	for _, n := range fc.nodes {
		s = append(s, n.addr)
	}
	return s
}

func TestRouteKeys(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)[:1]})
	for i := range 200 {
		k := fmt.Sprintf("key:%d", i)
		if got := do(t, c, "SET", k, "v"+k); got != "+OK\r\n" {
			t.Fatalf("SET %s: %q", k, got)
		}
	}
	for i := range 200 {
		k := fmt.Sprintf("key:%d", i)
		if got, want := do(t, c, "GET", k), bulkString("v"+k); got != want {
			t.Fatalf("GET %s: %q, want %q", k, got, want)
		}
	}
	st := c.Stats()
	if st.Moved != 0 || st.Ask != 0 || !st.Ready || st.Masters != 3 || st.SlotsCovered != Slots || st.Refreshes < 1 {
		t.Fatalf("stats %+v", st)
	}
	// Every key went to the node owning its slot: no node answered MOVED.
	for _, n := range fc.nodes {
		sets := 0
		for _, l := range n.commands() {
			if strings.Contains(l, " SET ") {
				sets++
			}
		}
		if sets == 0 {
			t.Errorf("node %d got no SET", n.idx)
		}
	}
}

func TestMoved(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour})
	k := keyIn(100, "m") // node 0's slot
	do(t, c, "SET", k, "before")
	fc.setOwner(100, 1) // migrated behind the proxy's back (the data is shared)
	if got := do(t, c, "GET", k); got != bulkString("before") {
		t.Fatalf("GET after MOVED: %q", got)
	}
	if st := c.Stats(); st.Moved != 1 {
		t.Fatalf("Moved = %d, want 1", st.Moved)
	}
	// The map learnt the slot's owner: the next request goes straight there.
	do(t, c, "GET", k)
	if st := c.Stats(); st.Moved != 1 {
		t.Fatalf("Moved = %d after a second GET, want 1", st.Moved)
	}
	waitFor(t, "the refresh MOVED asks for", func() bool { return c.Stats().Refreshes >= 2 })
	if owner := c.Map().Owner(100); c.Map().Shards[owner].Master.Addr != fc.nodes[1].addr {
		t.Fatalf("refreshed map: slot 100 on %s", c.Map().Shards[owner].Master.Addr)
	}
}

func TestAsk(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour})
	k := keyIn(200, "a")
	fc.mu.Lock()
	fc.migrating[200] = 1 // node 0 is migrating slot 200 to node 1; k is not on node 0
	fc.mu.Unlock()
	if got := do(t, c, "SET", k, "x"); got != "+OK\r\n" {
		t.Fatalf("SET during migration: %q", got)
	}
	if got := do(t, c, "GET", k); got != bulkString("x") {
		t.Fatalf("GET during migration: %q", got)
	}
	if st := c.Stats(); st.Ask != 2 || st.Moved != 0 {
		t.Fatalf("Ask %d Moved %d, want 2 and 0", st.Ask, st.Moved)
	}
	// ASKING and its command came back to back on one connection.
	log := fc.nodes[1].commands()
	pairs := 0
	for i, l := range log {
		if conn, ok := strings.CutSuffix(l, " ASKING"); ok {
			if i+1 >= len(log) || !strings.HasPrefix(log[i+1], conn+" ") || strings.HasSuffix(log[i+1], "ASKING") {
				t.Fatalf("ASKING not followed by its command on %s: %q", conn, log)
			}
			pairs++
		}
	}
	if pairs != 2 {
		t.Fatalf("%d ASKING pairs on the importing node: %q", pairs, log)
	}
	// ASK changes nothing in the map.
	if owner := c.Map().Owner(200); c.Map().Shards[owner].Master.Addr != fc.nodes[0].addr {
		t.Fatal("ASK moved the slot in the map")
	}
}

// ASKING pairs from many clients on one socket stay pairs.
func TestAskConcurrent(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour})
	fc.mu.Lock()
	fc.migrating[300] = 1
	fc.mu.Unlock()
	tag, plain := keyIn(300, "t"), keyIn(16000, "p")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				k := fmt.Sprintf("{%s}%d-%d", tag, g, i)
				if got := do(t, c, "SET", k, "v"); got != "+OK\r\n" {
					t.Errorf("SET %s: %q", k, got)
					return
				}
				// Plain traffic to the importing node's own slots on the same socket.
				if got := do(t, c, "SET", plain, "v"); got != "+OK\r\n" {
					t.Errorf("plain SET: %q", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := c.Stats(); st.Ask != 400 {
		t.Fatalf("Ask = %d, want 400", st.Ask)
	}
}

func TestRedirectLimit(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour, MaxRedirects: 3})
	k := keyIn(42, "r")
	fc.mu.Lock()
	fc.inject = func(n *fakeNode, args []string, _ bool) string {
		if args[0] == "GET" { // ping-pong between the nodes
			return fmt.Sprintf("-MOVED 42 %s\r\n", fc.nodes[1-n.idx].addr)
		}
		return ""
	}
	fc.mu.Unlock()
	got := do(t, c, "GET", k)
	if got != "-ERR too many cluster redirects for slot 42 (last: MOVED 42 "+fc.nodes[0].addr+")\r\n" &&
		got != "-ERR too many cluster redirects for slot 42 (last: MOVED 42 "+fc.nodes[1].addr+")\r\n" {
		t.Fatalf("got %q", got)
	}
	if st := c.Stats(); st.RedirectLimit != 1 || st.Moved != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMalformedRedirectNotFollowed(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour})
	for _, bad := range []string{
		"-MOVED 16384 127.0.0.1:1\r\n",
		"-MOVED 12 127.0.0.1\r\n",
		"-MOVED 12 127.0.0.1:0\r\n",
		"-MOVED 12 127.0.0.1:65536\r\n",
		"-ASK x 127.0.0.1:7000\r\n",
		"-ASK 12  127.0.0.1:7000\r\n",
		"-MOVED 12 127.0.0.1:7000 extra\r\n",
		"-MOVED -1 127.0.0.1:7000\r\n",
	} {
		fc.mu.Lock()
		fc.inject = func(_ *fakeNode, args []string, _ bool) string {
			if args[0] == "GET" {
				return bad
			}
			return ""
		}
		fc.mu.Unlock()
		if got := do(t, c, "GET", "k"); got != bad {
			t.Errorf("%q: client got %q", bad, got)
		}
	}
	if st := c.Stats(); st.Moved != 0 || st.Ask != 0 || st.BadRedirect != 8 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTryAgain(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour, TryAgain: 3})
	left := 2
	fc.mu.Lock()
	fc.inject = func(_ *fakeNode, args []string, _ bool) string {
		if args[0] == "MGET" && left > 0 {
			left--
			return "-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
		}
		return ""
	}
	fc.mu.Unlock()
	do(t, c, "MSET", "{t}a", "1", "{t}b", "2")
	if got := do(t, c, "MGET", "{t}a", "{t}b"); got != "*2\r\n$1\r\n1\r\n$1\r\n2\r\n" {
		t.Fatalf("MGET after TRYAGAIN: %q", got)
	}
	if st := c.Stats(); st.TryAgain != 2 {
		t.Fatalf("TryAgain = %d", st.TryAgain)
	}
	// Past the limit the client gets the TRYAGAIN.
	fc.mu.Lock()
	left = 100
	fc.mu.Unlock()
	if got := do(t, c, "MGET", "{t}a", "{t}b"); !strings.HasPrefix(got, "-TRYAGAIN") {
		t.Fatalf("MGET past the limit: %q", got)
	}
}

func TestCrossSlot(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	if got := do(t, c, "SINTER", "a", "b"); got != "-CROSSSLOT Keys in request don't hash to the same slot\r\n" {
		t.Fatalf("SINTER a b: %q", got)
	}
	if st := c.Stats(); st.CrossSlot != 1 {
		t.Fatalf("CrossSlot = %d", st.CrossSlot)
	}
}

func TestFanOut(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)})
	var args, keys []string
	for i := range 50 {
		k := fmt.Sprintf("f%d", i)
		keys = append(keys, k)
		args = append(args, k, "v"+k)
	}
	if got := do(t, c, append([]string{"MSET"}, args...)...); got != "+OK\r\n" {
		t.Fatalf("MSET: %q", got)
	}
	want := "*51\r\n"
	for _, k := range keys[:25] {
		want += bulkString("v" + k)
	}
	want += "$-1\r\n"
	for _, k := range keys[25:] {
		want += bulkString("v" + k)
	}
	mget := append(append(append([]string{"MGET"}, keys[:25]...), "missing"), keys[25:]...)
	if got := do(t, c, mget...); got != want {
		t.Fatalf("MGET:\n got %q\nwant %q", got, want)
	}
	if got := do(t, c, append([]string{"DEL", "missing"}, keys...)...); got != ":50\r\n" {
		t.Fatalf("DEL: %q", got)
	}
	if st := c.Stats(); st.Fragments < 100 {
		t.Fatalf("Fragments = %d", st.Fragments)
	}
	if got := do(t, c, "FLUSHDB"); got != "+OK\r\n" {
		t.Fatalf("FLUSHDB: %q", got)
	}
}

// A fan-out whose part gets MOVED still merges right.
func TestFanOutMoved(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), RefreshInterval: time.Hour})
	a, b := keyIn(10, "x"), keyIn(9000, "y")
	do(t, c, "MSET", a, "1", b, "2")
	fc.setOwner(10, 1)
	fc.setOwner(9000, 0)
	if got := do(t, c, "MGET", b, a); got != "*2\r\n$1\r\n2\r\n$1\r\n1\r\n" {
		t.Fatalf("MGET: %q", got)
	}
	if st := c.Stats(); st.Moved != 2 {
		t.Fatalf("Moved = %d", st.Moved)
	}
}

func TestReadFromReplica(t *testing.T) {
	fc := newFakeCluster(t, 1)
	replica := fc.addNode(0)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)[:1], ReadFrom: ReadPreferReplica})
	if got := do(t, c, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if got := do(t, c, "GET", "k"); got != bulkString("v") {
		t.Fatalf("GET: %q", got)
	}
	var ro, get, set bool
	for _, l := range replica.commands() {
		ro = ro || strings.HasSuffix(l, " READONLY")
		get = get || strings.HasSuffix(l, " GET k")
		set = set || strings.Contains(l, " SET ")
	}
	if !ro || !get || set {
		t.Fatalf("replica log %q: want READONLY and the GET, no SET", replica.commands())
	}
	if st := c.Stats(); st.Moved != 0 {
		t.Fatalf("Moved = %d", st.Moved)
	}
}

// A read a replica cannot take (it is down) goes to the master.
func TestReplicaDownFallsBack(t *testing.T) {
	fc := newFakeCluster(t, 1)
	replica := fc.addNode(0)
	replica.ln.Close()
	c := newTestCluster(t, Config{Seeds: seedsOf(fc)[:1], ReadFrom: ReadPreferReplica})
	if got := do(t, c, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	for range 5 {
		if got := do(t, c, "GET", "k"); got != bulkString("v") {
			t.Fatalf("GET: %q", got)
		}
	}
	if st := c.Stats(); st.Failed != 0 {
		t.Fatalf("Failed = %d", st.Failed)
	}
}

func TestReadFromReplicaWithoutReplica(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestCluster(t, Config{Seeds: seedsOf(fc), ReadFrom: ReadReplica})
	if got := do(t, c, "GET", "k"); got != fmt.Sprintf("-ERR no healthy replica serves slot %d (read_from: replica)\r\n", Slot([]byte("k"))) {
		t.Fatalf("GET: %q", got)
	}
	if got := do(t, c, "SET", "k", "v"); got != "+OK\r\n" {
		t.Fatalf("SET: %q", got)
	}
	if st := c.Stats(); st.Failed != 1 {
		t.Fatalf("Failed = %d", st.Failed)
	}
	c2 := newTestCluster(t, Config{Seeds: seedsOf(fc), ReadFrom: ReadPreferReplica})
	if got := do(t, c2, "GET", "k"); got != bulkString("v") {
		t.Fatalf("prefer_replica without replicas: %q", got)
	}
}
