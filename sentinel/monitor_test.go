package sentinel

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// fakeSentinel answers get-master-addr-by-name with what answer returns
// ("" for a null reply), and on a subscribed connection sends, after the
// confirmation, one +switch-master message per item of push.
func fakeSentinel(t *testing.T, answer func(name string) string, push ...string) string {
	t.Helper()
	return testserver.Fake(t, func(nc net.Conn) {
		r := bufio.NewReader(nc)
		for {
			v, err := readValue(r)
			if err != nil {
				return
			}
			args, _ := v.strings()
			if len(args) == 0 {
				return
			}
			var out []byte
			switch strings.ToUpper(args[0]) {
			case "AUTH":
				out = []byte("+OK\r\n")
			case "PING":
				out = []byte("*2\r\n$4\r\npong\r\n$0\r\n\r\n")
			case "SENTINEL":
				a := answer(args[2])
				if a == "" {
					out = []byte("*-1\r\n")
					break
				}
				host, port, _ := net.SplitHostPort(a)
				out = appendCommand(nil, host, port)
			case "SUBSCRIBE":
				out = []byte("*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n")
				for _, p := range push {
					out = appendCommand(out, "message", switchChannel, p)
				}
			default:
				out = []byte("-ERR unknown command\r\n")
			}
			if _, err := nc.Write(out); err != nil {
				return
			}
		}
	})
}

// switches records OnSwitch calls.
type switches struct {
	mu  sync.Mutex
	got []string
}

func (s *switches) on(master, addr, from string) {
	s.mu.Lock()
	s.got = append(s.got, master+" "+from+"->"+addr)
	s.mu.Unlock()
}

func (s *switches) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A Sentinel that names a replica, in its answers and in a +switch-master
// event, is caught by ROLE: the master another Sentinel names is used, and
// the lie is counted and never reported.
func TestMonitorRefusesReplica(t *testing.T) {
	master := testserver.StartRedis(t)
	replica := testserver.StartRedis(t, "--replicaof", "127.0.0.1", master.Addr[strings.LastIndexByte(master.Addr, ':')+1:])
	liar := fakeSentinel(t, func(string) string { return replica.Addr },
		"m1 127.0.0.1 1 "+strings.Replace(replica.Addr, ":", " ", 1))
	honest := fakeSentinel(t, func(string) string { return master.Addr })
	var sw switches
	m, err := New(Config{Sentinels: []string{liar, honest}, Masters: []string{"m1"}, OnSwitch: sw.on,
		Timeout: time.Second, Refresh: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Wait(5 * time.Second) {
		t.Fatalf("master not found; stats %+v", m.Stats())
	}
	waitFor(t, "the liar's event to be refused", 5*time.Second, func() bool { return m.Stats().Rejected >= 2 })
	time.Sleep(500 * time.Millisecond) // a few more refreshes
	if got := m.Addr("m1"); got != master.Addr {
		t.Errorf("Addr = %s, want the master %s", got, master.Addr)
	}
	if got := sw.list(); len(got) != 1 || got[0] != "m1 ->"+master.Addr {
		t.Errorf("OnSwitch calls %q, want only the master", got)
	}
	st := m.Stats()
	if st.Switches != 0 || st.Events != 1 || st.Subscribed != 2 {
		t.Errorf("stats %+v: want 0 switches, 1 event, 2 subscribed", st)
	}
}

// With only a lying Sentinel the master stays unknown: nothing is
// reported rather than a replica.
func TestMonitorOnlyLiar(t *testing.T) {
	master := testserver.StartRedis(t)
	replica := testserver.StartRedis(t, "--replicaof", "127.0.0.1", master.Addr[strings.LastIndexByte(master.Addr, ':')+1:])
	liar := fakeSentinel(t, func(string) string { return replica.Addr })
	m, err := New(Config{Sentinels: []string{liar}, Masters: []string{"m1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Wait(1500 * time.Millisecond) {
		t.Fatalf("a master was reported: %s", m.Addr("m1"))
	}
	if st := m.Stats(); st.Rejected < 1 || st.Known != 0 {
		t.Errorf("stats %+v: want refusals and no master", st)
	}
}

// A Sentinel that is down, one that does not know the master and one that
// does: the answer of the last is used, and every failure counted.
func TestMonitorSkipsDownSentinel(t *testing.T) {
	master := testserver.StartRedis(t)
	down := "127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))
	ignorant := fakeSentinel(t, func(string) string { return "" })
	good := fakeSentinel(t, func(string) string { return master.Addr })
	m, err := New(Config{Sentinels: []string{down, ignorant, good}, Masters: []string{"m1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Wait(5 * time.Second) {
		t.Fatalf("master not found; stats %+v", m.Stats())
	}
	if st := m.Stats(); st.QueryFailures < 2 || m.Addr("m1") != master.Addr {
		t.Errorf("stats %+v, addr %s", st, m.Addr("m1"))
	}
}

// A real fleet: the Monitor finds each master, follows a failover after
// the master is killed (+switch-master), and a killed Sentinel changes
// nothing.
func TestMonitorFollowsFailover(t *testing.T) {
	f := testserver.StartSentinelFleet(t, testserver.FleetConfig{Shards: 2, SentinelPassword: "spass"})
	var sw switches
	m, err := New(Config{Sentinels: f.SentinelAddrs(), Masters: f.Names, Auth: Auth{Password: "spass"},
		OnSwitch: sw.on, Refresh: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Wait(5 * time.Second) {
		t.Fatalf("masters not found; stats %+v", m.Stats())
	}
	for i, name := range f.Names {
		if got, want := m.Addr(name), f.Servers[i][0].Addr; got != want {
			t.Errorf("%s: %s, want %s", name, got, want)
		}
	}
	waitFor(t, "subscriptions", 5*time.Second, func() bool { return m.Stats().Subscribed == 3 })
	f.Sentinels[2].Stop()
	old := f.Servers[1][0]
	old.Stop()
	killed := time.Now()
	waitFor(t, "the failover", 30*time.Second, func() bool { return m.Addr("shard1") != old.Addr })
	t.Logf("switch seen %v after the kill", time.Since(killed).Round(time.Millisecond))
	if nm := f.Master(1); nm == nil || m.Addr("shard1") != nm.Addr {
		t.Errorf("shard1 at %s, the servers' master is %v", m.Addr("shard1"), nm)
	}
	st := m.Stats()
	if st.Switches != 1 || st.Events < 1 || st.Rejected != 0 {
		t.Errorf("stats %+v: want 1 switch, events, no refusal", st)
	}
	if got := sw.list(); len(got) != 3 {
		t.Errorf("OnSwitch calls %q, want two first addresses and one switch", got)
	}
}
