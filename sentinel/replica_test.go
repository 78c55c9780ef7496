package sentinel

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// A replica with its link up passes; a master, a replica whose master is
// gone, and a stopped server fail with their causes (real redis-servers).
func TestProberCheckReplica(t *testing.T) {
	m := testserver.StartRedis(t, "--repl-diskless-sync-delay", "0")
	r := testserver.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(m.Port))
	orphan := testserver.StartRedis(t, "--replicaof", "127.0.0.1", strconv.Itoa(testserver.FreePort(t)))
	p := NewProber(Auth{}, nil, time.Second)
	defer p.Close()
	waitFor(t, "the replica's link up", 20*time.Second, func() bool { return p.CheckReplica(r.Addr) == nil })
	if err := p.CheckReplica(m.Addr); !errors.Is(err, ErrNotReplica) || !strings.Contains(err.Error(), "it is a master") {
		t.Errorf("master: %v", err)
	}
	if err := p.CheckReplica(orphan.Addr); !errors.Is(err, ErrLinkDown) {
		t.Errorf("replica of a dead port: %v", err)
	}
	r.Stop()
	if err := p.CheckReplica(r.Addr); err == nil {
		t.Error("stopped replica passes")
	}
	p.Close()
	if err := p.CheckReplica(m.Addr); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestReplicaState(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:10\r\n", nil},
		{"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nhandshake\r\n:-1\r\n", ErrLinkDown},
		{"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$7\r\nconnect\r\n:-1\r\n", ErrLinkDown},
		{"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n", ErrNotReplica},
		{"*2\r\n$8\r\nsentinel\r\n*0\r\n", ErrNotReplica},
		{"*2\r\n$5\r\nslave\r\n:1\r\n", errBadReply},
		{"+OK\r\n", errBadReply},
	}
	for _, tt := range tests {
		v, err := read(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := replicaState(v); !errors.Is(err, tt.want) {
			t.Errorf("%q: %v, want %v", tt.in, err, tt.want)
		}
	}
	v, _ := read("-NOAUTH Authentication required.\r\n")
	var re *ReplyError
	if err := replicaState(v); !errors.As(err, &re) {
		t.Errorf("error reply: %v", err)
	}
}

// The Monitor learns the replicas of a real fleet, and hears of a replica
// that goes down.
func TestMonitorLearnsReplicas(t *testing.T) {
	f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 1, Replicas: 2, Sentinels: 1})
	var mu sync.Mutex
	got := map[string][]string{}
	m, err := New(Config{
		Sentinels: f.SentinelAddrs(), Masters: f.Names, Refresh: 200 * time.Millisecond,
		OnReplicas: func(master string, addrs []string) {
			mu.Lock()
			got[master] = addrs
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	replicas := []string{f.Servers[0][1].Addr, f.Servers[0][2].Addr}
	slices.Sort(replicas)
	seen := func(want []string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			r, ok := got["shard0"]
			return ok && slices.Equal(r, want)
		}
	}
	waitFor(t, "both replicas learnt", 10*time.Second, seen(replicas))
	f.Servers[0][2].Stop()
	left := []string{f.Servers[0][1].Addr}
	waitFor(t, "the stopped replica dropped once Sentinel flags it down", 10*time.Second, seen(left))
}

// FuzzReplicaReplies: no panic reading any reply as ROLE or SENTINEL
// REPLICAS, and every address accepted is host:port.
func FuzzReplicaReplies(f *testing.F) {
	f.Add([]byte("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:10\r\n"))
	f.Add([]byte("*1\r\n*6\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n$4\r\nport\r\n$4\r\n6380\r\n$5\r\nflags\r\n$5\r\nslave\r\n"))
	f.Add([]byte("*1\r\n*4\r\n$2\r\nip\r\n$0\r\n\r\n$5\r\nflags\r\n$12\r\ns_down,slave\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := read(string(b))
		if err != nil {
			return
		}
		_ = replicaState(v)
		addrs, err := parseReplicas(v)
		if err != nil {
			return
		}
		for _, a := range addrs {
			if !strings.Contains(a, ":") {
				t.Fatalf("address %q", a)
			}
		}
	})
}

// FuzzReplicaEvent: no panic, and an accepted payload names a master.
func FuzzReplicaEvent(f *testing.F) {
	f.Add("slave 127.0.0.1:6380 127.0.0.1 6380 @ shard0 127.0.0.1 6379")
	f.Add("master shard0 127.0.0.1 6379")
	f.Fuzz(func(t *testing.T, s string) {
		if m, ok := replicaEvent(s); ok && (m == "" || strings.ContainsAny(m, " \t\n")) {
			t.Fatalf("%q: master %q", s, m)
		}
	})
}
