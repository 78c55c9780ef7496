package cluster

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/resp"
)

// fakeCluster is an in-process stand-in for a Redis Cluster: nodes that
// speak enough RESP for the router (GET, SET, MGET, DEL, CLUSTER SHARDS and
// SLOTS, ASKING, READONLY, AUTH, PING), over one shared keyspace, with a
// slot map the test changes at will. It lets tests script MOVED, ASK,
// TRYAGAIN and malformed replies that a real cluster gives only by chance.
type fakeCluster struct {
	t        *testing.T
	password string
	noShards bool // answer CLUSTER SHARDS as Redis 6 does

	mu        sync.Mutex
	nodes     []*fakeNode
	owner     [Slots]int  // index into nodes; -1: not served
	migrating map[int]int // slot -> importing node
	data      map[string]string
	where     map[string]int                                       // the master each key lives on
	inject    func(n *fakeNode, args []string, asking bool) string // may answer first ("" to go on)
}

// fakeNode is one node: a listener and a log of what it was sent.
type fakeNode struct {
	fc      *fakeCluster
	idx     int
	addr    string
	replica int // >= 0: replica of that node
	ln      net.Listener

	mu    sync.Mutex
	log   []string // per command: "conn#N CMD args", ASKING included
	conn  int
	conns map[net.Conn]bool
}

// drop closes every connection the node has accepted (a crash, as the
// proxy sees it, without closing the listener).
func (n *fakeNode) drop() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for nc := range n.conns {
		nc.Close()
	}
}

func newFakeCluster(t *testing.T, masters int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{t: t, migrating: map[int]int{}, data: map[string]string{}, where: map[string]int{}}
	for i := range masters {
		fc.addNode(-1)
		_ = i
	}
	fc.spread()
	t.Cleanup(fc.close)
	return fc
}

// addNode starts a node; replicaOf >= 0 makes it that node's replica.
func (fc *fakeCluster) addNode(replicaOf int) *fakeNode {
	fc.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fc.t.Fatal(err)
	}
	fc.mu.Lock()
	n := &fakeNode{fc: fc, idx: len(fc.nodes), addr: ln.Addr().String(), replica: replicaOf, ln: ln}
	fc.nodes = append(fc.nodes, n)
	fc.mu.Unlock()
	go n.serve()
	return n
}

// spread gives the masters equal consecutive slot ranges.
func (fc *fakeCluster) spread() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var masters []int
	for _, n := range fc.nodes {
		if n.replica < 0 {
			masters = append(masters, n.idx)
		}
	}
	for s := range fc.owner {
		fc.owner[s] = masters[s*len(masters)/Slots]
	}
}

// setOwner moves slot, with its keys, to node.
func (fc *fakeCluster) setOwner(slot, node int) {
	fc.mu.Lock()
	fc.owner[slot] = node
	for k := range fc.where {
		if Slot([]byte(k)) == slot {
			fc.where[k] = node
		}
	}
	fc.mu.Unlock()
}

func (fc *fakeCluster) close() {
	for _, n := range fc.nodes {
		n.ln.Close()
	}
}

func (n *fakeNode) serve() {
	for {
		nc, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.conn++
		id := n.conn
		if n.conns == nil {
			n.conns = map[net.Conn]bool{}
		}
		n.conns[nc] = true
		n.mu.Unlock()
		go n.handle(nc, id)
	}
}

// commands returns the node's log.
func (n *fakeNode) commands() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.log...)
}

func (n *fakeNode) handle(nc net.Conn, id int) {
	defer func() {
		nc.Close()
		n.mu.Lock()
		delete(n.conns, nc)
		n.mu.Unlock()
	}()
	r := bufio.NewReader(nc)
	n.fc.mu.Lock()
	password := n.fc.password
	n.fc.mu.Unlock()
	authed := password == ""
	asking, readonly := false, false
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		n.mu.Lock()
		n.log = append(n.log, fmt.Sprintf("conn#%d %s", id, strings.Join(args, " ")))
		n.mu.Unlock()
		cmd := strings.ToUpper(args[0])
		var reply string
		switch {
		case cmd == "AUTH":
			if args[len(args)-1] == password {
				authed, reply = true, "+OK\r\n"
			} else {
				reply = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
			}
		case !authed:
			reply = "-NOAUTH Authentication required.\r\n"
		case cmd == "ASKING":
			asking, reply = true, "+OK\r\n"
		case cmd == "READONLY":
			readonly, reply = true, "+OK\r\n"
		default:
			reply = n.fc.answer(n, args, asking, readonly)
			asking = false
		}
		if _, err := io.WriteString(nc, reply); err != nil {
			return
		}
	}
}

// answer answers one command as a cluster node would.
func (fc *fakeCluster) answer(n *fakeNode, args []string, asking, readonly bool) string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.inject != nil {
		if r := fc.inject(n, args, asking); r != "" {
			return r
		}
	}
	cmd := strings.ToUpper(args[0])
	switch cmd {
	case "PING":
		return "+PONG\r\n"
	case "CLUSTER":
		switch strings.ToUpper(args[1]) {
		case "SHARDS":
			if fc.noShards {
				return "-ERR Unknown subcommand or wrong number of arguments for 'SHARDS'. Try CLUSTER HELP.\r\n"
			}
			return fc.shardsReply()
		case "SLOTS":
			return fc.slotsReply()
		}
		return "-ERR unknown subcommand\r\n"
	case "FLUSHDB":
		return "+OK\r\n"
	}
	if len(args) < 2 {
		return "-ERR wrong number of arguments\r\n"
	}
	keys := args[1:]
	if cmd == "SET" {
		keys = args[1:2]
	}
	if cmd == "MSET" {
		keys = nil
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
	}
	slot := Slot([]byte(keys[0]))
	for _, k := range keys[1:] {
		if Slot([]byte(k)) != slot {
			return "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
		}
	}
	self := n.idx
	if n.replica >= 0 {
		self = n.replica
	}
	owner := fc.owner[slot]
	importing, migrating := fc.migrating[slot]
	switch {
	case owner == self && (n.replica < 0 || readonly && isRead(cmd)):
		if migrating && n.replica < 0 {
			for _, k := range keys {
				if w, ok := fc.where[k]; !ok || w != self {
					return fmt.Sprintf("-ASK %d %s\r\n", slot, fc.nodes[importing].addr)
				}
			}
		}
	case migrating && importing == n.idx && asking:
	default:
		return fmt.Sprintf("-MOVED %d %s\r\n", slot, fc.nodes[owner].addr)
	}
	return fc.exec(self, cmd, args)
}

func isRead(cmd string) bool { return cmd == "GET" || cmd == "MGET" }

// exec runs a data command on master self's keys.
func (fc *fakeCluster) exec(self int, cmd string, args []string) string {
	switch cmd {
	case "GET":
		if v, ok := fc.data[args[1]]; ok {
			return bulkString(v)
		}
		return "$-1\r\n"
	case "SET":
		fc.data[args[1]], fc.where[args[1]] = args[2], self
		return "+OK\r\n"
	case "MSET":
		for i := 1; i+1 < len(args); i += 2 {
			fc.data[args[i]], fc.where[args[i]] = args[i+1], self
		}
		return "+OK\r\n"
	case "MGET":
		out := fmt.Sprintf("*%d\r\n", len(args)-1)
		for _, k := range args[1:] {
			if v, ok := fc.data[k]; ok {
				out += bulkString(v)
			} else {
				out += "$-1\r\n"
			}
		}
		return out
	case "DEL":
		n := 0
		for _, k := range args[1:] {
			if _, ok := fc.data[k]; ok {
				delete(fc.data, k)
				delete(fc.where, k)
				n++
			}
		}
		return ":" + strconv.Itoa(n) + "\r\n"
	}
	return "-ERR unknown command '" + cmd + "'\r\n"
}

func bulkString(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// shardsReply is CLUSTER SHARDS for the current map. Called with fc.mu held.
func (fc *fakeCluster) shardsReply() string {
	var shards []string
	for _, m := range fc.nodes {
		if m.replica >= 0 {
			continue
		}
		var ranges []string
		for _, r := range fc.ranges(m.idx) {
			ranges = append(ranges, fmt.Sprintf(":%d\r\n:%d\r\n", r[0], r[1]))
		}
		nodes := []string{fakeShardNode(m, "master")}
		for _, r := range fc.nodes {
			if r.replica == m.idx {
				nodes = append(nodes, fakeShardNode(r, "replica"))
			}
		}
		shards = append(shards, "*4\r\n$5\r\nslots\r\n"+fmt.Sprintf("*%d\r\n", 2*len(ranges))+strings.Join(ranges, "")+
			"$5\r\nnodes\r\n"+fmt.Sprintf("*%d\r\n", len(nodes))+strings.Join(nodes, ""))
	}
	return fmt.Sprintf("*%d\r\n", len(shards)) + strings.Join(shards, "")
}

func fakeShardNode(n *fakeNode, role string) string {
	host, port, _ := net.SplitHostPort(n.addr)
	return "*12\r\n" + bulkString("id") + bulkString(fmt.Sprintf("%040d", n.idx)) +
		bulkString("port") + ":" + port + "\r\n" + bulkString("ip") + bulkString(host) +
		bulkString("endpoint") + bulkString(host) + bulkString("role") + bulkString(role) +
		bulkString("health") + bulkString("online")
}

// slotsReply is CLUSTER SLOTS for the current map. Called with fc.mu held.
func (fc *fakeCluster) slotsReply() string {
	var out []string
	for _, m := range fc.nodes {
		if m.replica >= 0 {
			continue
		}
		nodes := []string{fakeSlotsNode(m)}
		for _, r := range fc.nodes {
			if r.replica == m.idx {
				nodes = append(nodes, fakeSlotsNode(r))
			}
		}
		for _, r := range fc.ranges(m.idx) {
			out = append(out, fmt.Sprintf("*%d\r\n:%d\r\n:%d\r\n", 2+len(nodes), r[0], r[1])+strings.Join(nodes, ""))
		}
	}
	return fmt.Sprintf("*%d\r\n", len(out)) + strings.Join(out, "")
}

func fakeSlotsNode(n *fakeNode) string {
	host, port, _ := net.SplitHostPort(n.addr)
	return "*3\r\n" + bulkString(host) + ":" + port + "\r\n" + bulkString(fmt.Sprintf("%040d", n.idx))
}

// ranges returns node i's slot ranges. Called with fc.mu held.
func (fc *fakeCluster) ranges(i int) [][2]int {
	var r [][2]int
	for s := range Slots {
		if fc.owner[s] != i {
			continue
		}
		if k := len(r); k > 0 && r[k-1][1] == s-1 {
			r[k-1][1] = s
		} else {
			r = append(r, [2]int{s, s})
		}
	}
	return r
}

// readCommand reads one multibulk command.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not multibulk: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("bad count %q", line)
	}
	args := make([]string, n)
	for i := range args {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			return nil, err
		}
		b := make([]byte, size+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:size])
	}
	return args, nil
}

// result is a Completer that hands the reply to a channel.
type result chan string

func (r result) Complete(out []byte) { r <- string(out) }

// request parses a command into a codec.Request as a client session would.
func request(t *testing.T, args ...string) *codec.Request {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		b.WriteString(bulkString(a))
	}
	d := &resp.Dialect{}
	req := &codec.Request{}
	if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(b.String()), req); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return req
}

// do routes one command and waits for its reply.
func do(t *testing.T, c *Cluster, args ...string) string {
	t.Helper()
	r := make(result, 1)
	c.Route(request(t, args...), 1, r)
	select {
	case out := <-r:
		return out
	case <-time.After(10 * time.Second):
		t.Fatalf("%q: no reply within 10s", args)
		return ""
	}
}

// newTestCluster returns a Cluster over seeds, closed when the test ends.
func newTestCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if cfg.Node.Timeout == 0 {
		cfg.Node.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// keyIn returns a key that hashes to slot.
func keyIn(slot int, prefix string) string {
	for i := 0; ; i++ {
		k := prefix + strconv.Itoa(i)
		if Slot([]byte(k)) == slot {
			return k
		}
	}
}

// waitFor polls cond until it holds or 5s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
