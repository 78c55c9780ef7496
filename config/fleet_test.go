package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestFleetSection(t *testing.T) {
	in := "fleet:\n  endpoints:\n    - 127.0.0.1:2379\n    - 127.0.0.1:2479\n  prefix: /shardproxy/prod\n" +
		"  id: p1\n  username: u\n  password: pw\n  listen_host: 127.0.0.2\n"
	c, err := Parse([]byte(in+pool("")), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Fleet{Endpoints: []string{"127.0.0.1:2379", "127.0.0.1:2479"}, Prefix: "/shardproxy/prod",
		ID: "p1", Username: "u", Password: "pw", ListenHost: "127.0.0.2"}
	if !reflect.DeepEqual(c.Fleet, want) || len(c.Pools) != 1 {
		t.Fatalf("fleet %+v, pools %d", c.Fleet, len(c.Pools))
	}
	// A file of a fleet may hold only its fleet: section.
	c, err = Parse([]byte("fleet:\n  endpoints: a:1, b:2\n  prefix: /p\n"), "x.yml")
	if err != nil || len(c.Pools) != 0 || !reflect.DeepEqual(c.Fleet.Endpoints, []string{"a:1", "b:2"}) {
		t.Fatalf("only fleet: %+v, %v", c, err)
	}
	c, _ = Parse([]byte(pool("")), "x.yml")
	if c.Fleet != nil {
		t.Fatalf("no fleet: section gave %+v", c.Fleet)
	}
	for _, tc := range []struct{ in, want string }{
		{"fleet:\n  bogus: 1\n", `x.yml:2: pool "fleet": bogus: unknown key`},
		{"fleet: 3\n", `x.yml:1: pool "fleet": must be a mapping`},
		{"fleet:\n  prefix: /p\n", `x.yml:2: pool "fleet": endpoints: at least one`},
		{"fleet:\n  endpoints: a:1\n  prefix: p\n", `prefix "p": want a key prefix`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p/\n", `prefix "/p/": want a key prefix`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p\n  tls_cert: c.pem\n", `tls_cert and tls_key: both or neither`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p\n  username: u\n", `username and password: both or neither`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p\n  id: a/b\n", `id "a/b": must not contain /`},
		{"fleet:\n  endpoints:\n    x: 1\n  prefix: /p\n", `endpoints: must be a list`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p\n  listen_host: 1.2.3.4:5\n", `listen_host "1.2.3.4:5": want a host`},
		{"fleet:\n  endpoints: a:1\n  prefix: /p\n  id:\n    - x\n", `id: must be a single value`},
	} {
		_, err := Parse([]byte(tc.in+pool("")), "x.yml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}
