package cluster

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

// The testdata replies were read from a redis-server 7.0.15 cluster of
// three masters with a replica each (ports 7101-7106): *_7.0 as formed,
// *_failover_7.0 after 7102 was killed and 7104 promoted.

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tnode(port, id string, healthy bool) Node {
	return Node{Addr: "127.0.0.1:" + port, ID: id, Healthy: healthy}
}

const (
	id7101 = "a68f79cd094307005f9a57ae51010ab124a8d5f0"
	id7102 = "0b2b467e19adf4bca2ed3ad104f799a30516a3f3"
	id7103 = "a028813969f012eac7652fa3f970d53177a17744"
	id7104 = "f4a2cf064872a088520e16b716a61a987ba1b672"
	id7105 = "2d44a3dec96fbbcb083541aaaef34d92fb769428"
	id7106 = "c31a4bea4a5264ac5c47a7246783afb3378fa967"
)

func TestParseShardsAndSlots(t *testing.T) {
	formed := []Shard{
		{Master: tnode("7101", id7101, true), Replicas: []Node{tnode("7106", id7106, true)}},
		{Master: tnode("7102", id7102, true), Replicas: []Node{tnode("7104", id7104, true)}},
		{Master: tnode("7103", id7103, true), Replicas: []Node{tnode("7105", id7105, true)}},
	}
	formedRanges := [][][2]int{{{0, 5460}}, {{5461, 10922}}, {{10923, 16383}}}
	tests := []struct {
		file   string
		parse  func([]byte, string) (*SlotMap, error)
		shards []Shard
		ranges [][][2]int
	}{
		{"shards_7.0.resp", ParseShards, formed, formedRanges},
		{"slots_7.0.resp", ParseSlots, formed, formedRanges},
		{"shards_failover_7.0.resp", ParseShards, []Shard{
			{Master: tnode("7101", id7101, true), Replicas: []Node{tnode("7106", id7106, true)}},
			{Master: tnode("7102", id7102, false)}, // the failed master: a shard serving nothing
			{Master: tnode("7104", id7104, true)},
			{Master: tnode("7103", id7103, true), Replicas: []Node{tnode("7105", id7105, true)}},
		}, [][][2]int{{{0, 5460}}, nil, {{5461, 10922}}, {{10923, 16383}}}},
		{"slots_failover_7.0.resp", ParseSlots, []Shard{
			{Master: tnode("7101", id7101, true), Replicas: []Node{tnode("7106", id7106, true)}},
			{Master: tnode("7104", id7104, true), Replicas: []Node{}},
			{Master: tnode("7103", id7103, true), Replicas: []Node{tnode("7105", id7105, true)}},
		}, [][][2]int{{{0, 5460}}, {{5461, 10922}}, {{10923, 16383}}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m, err := tt.parse(readTestdata(t, tt.file), "127.0.0.1:7101")
			if err != nil {
				t.Fatal(err)
			}
			for i := range m.Shards {
				if len(m.Shards[i].Replicas) == 0 && tt.shards[i].Replicas != nil {
					m.Shards[i].Replicas = []Node{}
				}
			}
			if !reflect.DeepEqual(m.Shards, tt.shards) {
				t.Fatalf("shards\n got %+v\nwant %+v", m.Shards, tt.shards)
			}
			for i, want := range tt.ranges {
				if got := m.Ranges(i); !reflect.DeepEqual(got, want) {
					t.Errorf("shard %d ranges %v, want %v", i, got, want)
				}
			}
			if m.Covered() != Slots {
				t.Errorf("Covered = %d", m.Covered())
			}
			checkRuns(t, m)
		})
	}
}

// checkRuns checks that m.Runs agrees with m.Ranges of every shard.
func checkRuns(t *testing.T, m *SlotMap) {
	t.Helper()
	byShard := make([][][2]int, len(m.Shards))
	last := -1
	for _, r := range m.Runs() {
		if r.First <= last || r.Last < r.First {
			t.Fatalf("runs out of order: %+v", m.Runs())
		}
		last = r.Last
		byShard[r.Shard] = append(byShard[r.Shard], [2]int{r.First, r.Last})
	}
	for i := range m.Shards {
		if want := m.Ranges(i); !reflect.DeepEqual(byShard[i], want) {
			t.Errorf("shard %d: runs %v, ranges %v", i, byShard[i], want)
		}
	}
}

func TestRunsSplitAndUncovered(t *testing.T) {
	m := newSlotMap()
	m.Shards = make([]Shard, 3)
	for _, a := range []struct{ first, last, shard int64 }{
		{0, 99, 0}, {100, 100, 1}, {101, 200, 0}, {500, 16000, 2}, {16383, 16383, 1},
	} {
		if err := m.assign(a.first, a.last, int(a.shard)); err != nil {
			t.Fatal(err)
		}
	}
	want := []SlotRun{{0, 99, 0}, {100, 100, 1}, {101, 200, 0}, {500, 16000, 2}, {16383, 16383, 1}}
	if got := m.Runs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Runs = %v, want %v", got, want)
	}
	checkRuns(t, m)
	if got := newSlotMap().Runs(); got != nil {
		t.Errorf("empty map: Runs = %v", got)
	}
}

// respArray encodes nested test values: string -> bulk, int -> integer,
// []any -> array, nil -> null bulk.
func respArray(v any) string {
	switch x := v.(type) {
	case nil:
		return "$-1\r\n"
	case string:
		return bulkString(x)
	case int:
		return ":" + itoa(x) + "\r\n"
	case []any:
		s := "*" + itoa(len(x)) + "\r\n"
		for _, e := range x {
			s += respArray(e)
		}
		return s
	}
	panic("respArray: unsupported value")
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func shardNode(fields ...any) []any { return fields }

func TestParseShardsEdges(t *testing.T) {
	from := "10.0.0.9:7000"
	tests := []struct {
		name  string
		reply any
		want  []Shard
		err   string
	}{
		{"endpoint unknown: ip", []any{[]any{"slots", []any{0, 16383}, "nodes", []any{
			shardNode("id", "a", "port", 7000, "ip", "10.0.0.1", "endpoint", "?", "role", "master", "health", "online"),
		}}}, []Shard{{Master: Node{Addr: "10.0.0.1:7000", ID: "a", Healthy: true}}}, ""},
		{"no ip either: the sender's host", []any{[]any{"slots", []any{0, 16383}, "nodes", []any{
			shardNode("port", 7001, "ip", "", "endpoint", "", "role", "master"),
		}}}, []Shard{{Master: Node{Addr: "10.0.0.9:7001", Healthy: true}}}, ""},
		{"hostname endpoint, IPv6 ip", []any{[]any{"slots", []any{0, 16383}, "nodes", []any{
			shardNode("port", 7000, "ip", "::1", "endpoint", "redis-0.example", "role", "master"),
			shardNode("port", 7001, "ip", "::1", "endpoint", "::1", "role", "replica", "health", "loading"),
		}}}, []Shard{{Master: Node{Addr: "redis-0.example:7000", Healthy: true}, Replicas: []Node{{Addr: "[::1]:7001"}}}}, ""},
		{"tls-port only", []any{[]any{"slots", []any{0, 16383}, "nodes", []any{
			shardNode("tls-port", 7443, "ip", "10.0.0.1", "role", "master"),
		}}}, []Shard{{Master: Node{Addr: "10.0.0.1:7443", Healthy: true}}}, ""},
		{"two masters in a shard: the healthy one", []any{[]any{"slots", []any{0, 16383}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "master", "health", "fail"),
			shardNode("port", 7001, "ip", "10.0.0.2", "role", "master", "health", "online"),
		}}}, []Shard{{Master: Node{Addr: "10.0.0.2:7001", Healthy: true}, Replicas: []Node{{Addr: "10.0.0.1:7000"}}}}, ""},
		{"many ranges", []any{[]any{"slots", []any{0, 10, 20, 16383}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "master"),
		}}, []any{"slots", []any{11, 19}, "nodes", []any{
			shardNode("port", 7001, "ip", "10.0.0.2", "role", "master"),
		}}}, []Shard{{Master: Node{Addr: "10.0.0.1:7000", Healthy: true}}, {Master: Node{Addr: "10.0.0.2:7001", Healthy: true}}}, ""},
		{"shard without master or slots is skipped", []any{[]any{"slots", []any{}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "replica"),
		}}}, nil, ""},

		{"error reply", nil, nil, "cluster: node replied -ERR This instance has cluster support disabled"},
		{"not an array", "x", nil, "cluster: bad topology reply: reply is no array"},
		{"slots without master", []any{[]any{"slots", []any{0, 5}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "replica"),
		}}}, nil, "cluster: bad topology reply: a shard serving slots has no master"},
		{"odd slot list", []any{[]any{"slots", []any{0}, "nodes", []any{}}}, nil,
			"cluster: bad topology reply: a shard needs slots (pairs of numbers) and nodes"},
		{"slot out of range", []any{[]any{"slots", []any{0, 16384}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "master"),
		}}}, nil, "cluster: bad topology reply: bad slot range 0-16384"},
		{"reversed range", []any{[]any{"slots", []any{9, 1}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1", "role", "master"),
		}}}, nil, "cluster: bad topology reply: bad slot range 9-1"},
		{"overlap", []any{
			[]any{"slots", []any{0, 10}, "nodes", []any{shardNode("port", 7000, "ip", "10.0.0.1", "role", "master")}},
			[]any{"slots", []any{10, 20}, "nodes", []any{shardNode("port", 7001, "ip", "10.0.0.1", "role", "master")}},
		}, nil, "cluster: bad topology reply: slot 10 is served by two shards"},
		{"no port", []any{[]any{"slots", []any{0, 1}, "nodes", []any{
			shardNode("id", "x", "ip", "10.0.0.1", "role", "master"),
		}}}, nil, `cluster: bad topology reply: node "x" has no port`},
		{"bad port", []any{[]any{"slots", []any{0, 1}, "nodes", []any{
			shardNode("port", 70000, "ip", "10.0.0.1", "role", "master"),
		}}}, nil, "cluster: bad topology reply: bad port 70000"},
		{"bad host", []any{[]any{"slots", []any{0, 1}, "nodes", []any{
			shardNode("port", 7000, "ip", "10.0.0.1 x", "role", "master"),
		}}}, nil, `cluster: bad topology reply: bad host "10.0.0.1 x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "-ERR This instance has cluster support disabled\r\n"
			if tt.reply != nil {
				raw = respArray(tt.reply)
			}
			m, err := ParseShards([]byte(raw), from)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(m.Shards, tt.want) {
				t.Fatalf("shards\n got %+v\nwant %+v", m.Shards, tt.want)
			}
		})
	}
}

func TestParseSlotsEdges(t *testing.T) {
	from := "10.0.0.9:7000"
	m, err := ParseSlots([]byte(respArray([]any{
		[]any{0, 99, []any{"", 7000, "id0"}, []any{"?", 7001}},
		[]any{100, 16383, []any{"10.0.0.2", 7002, "id2", []any{"hostname", "h"}}},
		[]any{50, 50, []any{"", 7000}}, // same master, overlapping itself
	})), from)
	if err != nil {
		t.Fatal(err)
	}
	want := []Shard{
		{Master: Node{Addr: "10.0.0.9:7000", ID: "id0", Healthy: true}, Replicas: []Node{{Addr: "10.0.0.9:7001", Healthy: true}}},
		{Master: Node{Addr: "10.0.0.2:7002", ID: "id2", Healthy: true}, Replicas: []Node{}},
	}
	if !reflect.DeepEqual(m.Shards, want) {
		t.Fatalf("shards\n got %+v\nwant %+v", m.Shards, want)
	}
	for _, bad := range []any{
		[]any{[]any{0, 1}},
		[]any{[]any{"0", 1, []any{"h", 1}}},
		[]any{[]any{0, 1, []any{"h"}}},
		[]any{[]any{0, 1, "h"}},
		[]any{[]any{0, 1, []any{"h", 0}}},
		[]any{[]any{-1, 1, []any{"h", 1}}},
		[]any{[]any{0, 1, []any{"h", 1}}, []any{1, 2, []any{"g", 1}}},
	} {
		if _, err := ParseSlots([]byte(respArray(bad)), from); !errors.Is(err, ErrBadTopology) {
			t.Errorf("%s: err %v", strings.ReplaceAll(respArray(bad), "\r\n", " "), err)
		}
	}
	_, err = ParseSlots([]byte("-ERR This instance has cluster support disabled\r\n"), from)
	if !errors.Is(err, ErrNotCluster) {
		t.Fatalf("error reply: %v", err)
	}
}

func TestReadValueErrors(t *testing.T) {
	for _, in := range []string{
		"", "*", "*1\r\n", "*2\r\n:1\r\n", "$5\r\nabc\r\n", "$3\r\nabcde", ":x\r\n",
		"?x\r\n", "*-2\r\n", "*1\r\n:1\r\n:2\r\n", "$-2\r\n", "*99999999999\r\n",
		strings.Repeat("*1\r\n", maxDepth+2) + ":1\r\n", "+ok\n",
	} {
		if _, err := readValue([]byte(in)); err == nil {
			t.Errorf("readValue(%q): no error", in)
		}
	}
	for _, in := range []string{"+OK\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n", ":-5\r\n", "$0\r\n\r\n"} {
		if _, err := readValue([]byte(in)); err != nil {
			t.Errorf("readValue(%q): %v", in, err)
		}
	}
}

func BenchmarkParseShards(b *testing.B) {
	raw := readTestdata(b, "shards_7.0.resp")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseShards(raw, "127.0.0.1:7101"); err != nil {
			b.Fatal(err)
		}
	}
}
