package dnspool

import (
	"errors"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
	_ "shardproxy/shard" // the sharded kind's rules, for Parse
)

func names(s []config.Server) string {
	var b []string
	for _, x := range s {
		b = append(b, x.Name+"="+x.Addr)
	}
	return strings.Join(b, " ")
}

func TestLookup(t *testing.T) {
	d := testserver.StartDNS(t)
	d.SetSRV("_mc._tcp.cache.test",
		testserver.SRVTarget{Target: "mc-1.cache.test", Port: 11212, Addr: "10.0.0.2", Weight: 30},
		testserver.SRVTarget{Target: "MC-0.cache.test", Port: 11211, Addr: "10.0.0.1", Weight: 70},
		testserver.SRVTarget{Target: "backup.cache.test", Port: 11211, Addr: "10.0.0.9", Priority: 10},
		testserver.SRVTarget{Target: "v6.cache.test", Port: 6379, Addr: "::1"})
	d.SetAddrs("hosts.cache.test", "10.0.0.3", "10.0.0.1", "::2", "10.0.0.1")
	d.SetSRV("_bad._tcp.cache.test", testserver.SRVTarget{Target: "nowhere.cache.test", Port: 1})
	r, err := newResolver(d.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sf   config.ServersFrom
		want string // names=addrs, or the error's text
	}{
		{"srv", config.ServersFrom{DNS: "_mc._tcp.cache.test.", Type: "SRV"},
			"mc-0.cache.test=10.0.0.1:11211 mc-1.cache.test=10.0.0.2:11212 v6.cache.test=[::1]:6379"},
		{"a", config.ServersFrom{DNS: "hosts.cache.test", Type: "A", Port: 11211},
			"10.0.0.1=10.0.0.1:11211 10.0.0.3=10.0.0.3:11211"},
		{"aaaa", config.ServersFrom{DNS: "hosts.cache.test", Type: "AAAA", Port: 6379}, "[::2]:6379=[::2]:6379"},
		{"nxdomain", config.ServersFrom{DNS: "none.cache.test", Type: "SRV"}, "dnspool: no records: SRV none.cache.test: NXDOMAIN"},
		{"no such records", config.ServersFrom{DNS: "_mc._tcp.cache.test", Type: "A", Port: 1}, "dnspool: no records: A _mc._tcp.cache.test"},
		{"target without address", config.ServersFrom{DNS: "_bad._tcp.cache.test", Type: "SRV"},
			"dnspool: SRV target nowhere.cache.test has no address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.lookup(&tt.sf)
			if s := names(got); err != nil {
				s = err.Error()
				if s != tt.want {
					t.Errorf("error %s\nwant %s", s, tt.want)
				}
			} else if s != tt.want {
				t.Errorf("got %s\nwant %s", s, tt.want)
			}
			for _, s := range got {
				if s.Weight != 1 {
					t.Errorf("%s: weight %d, want 1", s.Name, s.Weight)
				}
			}
		})
	}
	// SERVFAIL and a stopped server are failures, not empty answers.
	d.Fail(true)
	if _, err := r.lookup(&tests[0].sf); err == nil || errors.Is(err, errEmpty) || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Errorf("servfail: %v", err)
	}
	d.Fail(false)
	d.Stop()
	if _, err := r.lookup(&tests[0].sf); err == nil || errors.Is(err, errEmpty) {
		t.Errorf("stopped: %v", err)
	}
	d.Start()
	if got, err := r.lookup(&tests[0].sf); err != nil || len(got) != 3 {
		t.Errorf("restarted: %v %v", got, err)
	}
}

func TestSystemResolver(t *testing.T) {
	old := ResolvConf
	defer func() { ResolvConf = old }()
	ResolvConf = t.TempDir() + "/resolv.conf"
	if _, err := newResolver("", time.Second); err == nil {
		t.Error("a missing resolv.conf is an error")
	}
	ResolvConf = "testdata/resolv.conf"
	r, err := newResolver("", time.Second)
	if err != nil || strings.Join(r.servers, " ") != "127.0.0.53:53 [::1]:53" {
		t.Errorf("servers %v, %v", r, err)
	}
}

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(text), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Resolve hands out a copy with the servers of the answer, never changes
// its input, falls back on the servers key, and fails a pool without
// either; a watcher follows changes and says so.
func TestGroupResolve(t *testing.T) {
	d := testserver.StartDNS(t)
	d.SetSRV("_mc._tcp.a.test", testserver.SRVTarget{Target: "mc-0.a.test", Port: 11211, Addr: "127.0.0.1"})
	changes := make(chan string, 10)
	g := New(Config{OnChange: func(p string) { changes <- p }, StartWait: 300 * time.Millisecond})
	defer g.Close()
	cfg := parse(t, "plain:\n  listen: 127.0.0.1:1\n  servers:\n   - 127.0.0.1:1:1\n"+
		"found:\n  listen: 127.0.0.1:2\n  servers_from:\n    dns: _mc._tcp.a.test\n    interval: 100\n    resolver: "+d.Addr+"\n"+
		"fallback:\n  listen: 127.0.0.1:3\n  servers_from:\n    dns: _mc._tcp.none.test\n    resolver: "+d.Addr+"\n  servers:\n   - 127.0.0.1:9:1\n")
	got, err := g.Resolve(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got == cfg || len(cfg.Pool("found").Servers) != 0 || got.Pool("plain") != cfg.Pool("plain") {
		t.Fatal("Resolve changed its input or copied what it need not")
	}
	if s := names(got.Pool("found").Servers); s != "mc-0.a.test=127.0.0.1:11211" {
		t.Errorf("found: %s", s)
	}
	if s := names(got.Pool("fallback").Servers); s != "127.0.0.1:9=127.0.0.1:9" {
		t.Errorf("fallback: %s", s)
	}

	d.SetSRV("_mc._tcp.a.test", testserver.SRVTarget{Target: "mc-0.a.test", Port: 11211, Addr: "127.0.0.1"},
		testserver.SRVTarget{Target: "mc-1.a.test", Port: 11212, Addr: "127.0.0.1"})
	select {
	case p := <-changes:
		if p != "found" {
			t.Errorf("change of %s", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no change seen")
	}
	again, _ := g.Resolve(cfg)
	if n := len(again.Pool("found").Servers); n != 2 {
		t.Errorf("after the change: %d servers", n)
	}

	bad := parse(t, "lost:\n  listen: 127.0.0.1:4\n  servers_from:\n    dns: _mc._tcp.none.test\n    resolver: "+d.Addr+"\n")
	_, err = g.Resolve(bad)
	want := `pool "lost": servers_from: no answer for SRV _mc._tcp.none.test within 300ms (dnspool: no records: SRV _mc._tcp.none.test: NXDOMAIN), and no servers key to start on`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}

	g.Sync(cfg)
	var pools []string
	for _, st := range g.Stats() {
		pools = append(pools, st.Pool)
	}
	if strings.Join(pools, " ") != "fallback found" {
		t.Errorf("after Sync: watchers of %v", pools)
	}
	st := g.Stats()[1]
	if st.Changes != 2 || st.Servers != 2 || st.Resolutions < 2 || st.LastChange.IsZero() {
		t.Errorf("stats %+v", st)
	}
}
