package main

import (
	"io"
	"strings"
	"testing"

	"shardproxy/config"
)

func TestRehost(t *testing.T) {
	cfg := &config.Config{Pools: []*config.Pool{
		{Name: "a", Listen: config.Listen{Network: "tcp", Addr: "127.0.0.1:22121"}},
		{Name: "b", Listen: config.Listen{Network: "unix", Addr: "/tmp/b.sock"}},
		{Name: "c", Listen: config.Listen{Network: "tcp", Addr: "0.0.0.0:22122"},
			ListenTags: []config.TaggedListen{{Listen: config.Listen{Network: "tcp", Addr: "127.0.0.1:22123"}}}},
	}}
	rehost(cfg, "")
	if cfg.Pools[0].Listen.Addr != "127.0.0.1:22121" {
		t.Fatalf("no host moved %s", cfg.Pools[0].Listen.Addr)
	}
	rehost(cfg, "127.0.0.2")
	got := []string{cfg.Pools[0].Listen.Addr, cfg.Pools[1].Listen.Addr, cfg.Pools[2].Listen.Addr,
		cfg.Pools[2].ListenTags[0].Listen.Addr}
	want := []string{"127.0.0.2:22121", "/tmp/b.sock", "127.0.0.2:22122", "127.0.0.2:22123"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rehost: %q, want %q", got, want)
		}
	}
}

func TestFleetFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for valid
	}{
		{[]string{"--etcd", "127.0.0.1:2379", "--etcd-prefix", "/shardproxy/x"}, ""},
		{[]string{"--etcd", "127.0.0.1:2379"}, `prefix "": want a key prefix`},
		{[]string{"--etcd-prefix", "/x"}, "--etcd-prefix needs --etcd"},
		{[]string{"--etcd", "a:1", "--etcd-prefix", "/x", "--etcd-cert", "c.pem"}, "tls_cert and tls_key"},
		{[]string{"--etcd", "a:1", "--etcd-prefix", "/x", "--etcd-user", "u"}, "username and password"},
	} {
		o, err := parseFlags(tc.args, io.Discard)
		switch {
		case tc.want == "" && (err != nil || o.fleetSection == nil || o.fleetSection.Prefix != "/shardproxy/x"):
			t.Errorf("%q: %v", tc.args, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q", tc.args, err, tc.want)
		}
	}
}
