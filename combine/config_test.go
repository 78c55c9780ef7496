package combine

import (
	"strings"
	"testing"

	"shardproxy/config"
	_ "shardproxy/shard" // the pools a route names
)

const twoPools = `old:
  listen: 127.0.0.1:0
  servers:
    - 127.0.0.1:11211:1
new:
  listen: 127.0.0.1:0
  servers:
    - 127.0.0.1:11212:1
`

func TestConfigRoute(t *testing.T) {
	for _, tt := range []struct {
		name, route string
		want        string // describe(), or the error's text
		bad         bool
	}{
		{name: "migrate", route: "    migrate:\n      from: old\n      to: new\n      phase: dual_write\n",
			want: "migrate old->new dual_write"},
		{name: "at", route: "    migrate:\n      from: old\n      to: new\n      phase: from_only\n      at:\n" +
			"        dual_write: 2030-01-01T00:00:00Z\n        to_only: 2030-01-02T00:00:00+02:00\n",
			want: "migrate old->new from_only, dual_write at 2030-01-01T00:00:00Z, to_only at 2030-01-02T00:00:00+02:00"},
		{name: "at out of order", route: "    migrate:\n      from: old\n      to: new\n      phase: from_only\n      at:\n" +
			"        warm: 2030-01-01T00:00:00Z\n        dual_write: 2030-01-02T00:00:00Z\n", bad: true,
			want: "route.migrate.at.dual_write: must come after warm"},
		{name: "at before phase", route: "    migrate:\n      from: old\n      to: new\n      phase: warm\n      at:\n" +
			"        dual_write: 2030-01-01T00:00:00Z\n", bad: true, want: "migrate's at must name phases after its phase"},
		{name: "at bad time", route: "    migrate:\n      from: old\n      to: new\n      phase: warm\n      at:\n" +
			"        to_only: tomorrow\n", bad: true, want: `"tomorrow" is no RFC 3339 time`},
		{name: "warm up", route: "    warm_up:\n      cold: new\n      warm: old\n", want: "warm_up cold new warm old"},
		{name: "shadow and failover", route: "    pool: old\n    shadow:\n      pool: new\n      fraction: 0.25\n      requests: reads\n" +
			"    failover:\n      pool: new\n      on: error_or_miss\n",
			want: "pool old failover new on error_or_miss shadow new reads 0.25"},
		{name: "no such pool", route: "    pool: nope\n", bad: true, want: `pool "cache": route: no pool is called "nope"`},
		{name: "bad phase", route: "    migrate:\n      from: old\n      to: new\n      phase: half\n", bad: true,
			want: `route.migrate.phase: "half" is not one of from_only, dual_write, warm, to_only`},
		{name: "two routes", route: "    pool: old\n    warm_up:\n      cold: new\n      warm: old\n", bad: true,
			want: "must have exactly one of migrate, warm_up or pool"},
		{name: "fraction", route: "    pool: old\n    shadow:\n      pool: new\n      fraction: 2\n", bad: true,
			want: `route.shadow.fraction: "2" is not a number in (0, 1]`},
		{name: "unknown key", route: "    pool: old\n    mirror: new\n", bad: true, want: `unknown key "mirror"`},
		{name: "itself", route: "    pool: cache\n", bad: true, want: "cannot route to itself"},
		{name: "no listen", route: "    pool: old\nlone:\n  servers:\n    - 127.0.0.1:1:1\n", bad: true,
			want: `pool "lone": listen: is missing`},
		{name: "servers too", route: "    pool: old\n  servers:\n    - 127.0.0.1:1:1\n", bad: true,
			want: "servers: a route pool has no servers of its own"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := twoPools + "cache:\n  listen: 127.0.0.1:0\n  route:\n" + tt.route
			c, err := config.Parse([]byte(text), "test.yml")
			if tt.bad {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err %v, want one saying %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pools[2]
			if p.Kind() != config.KindRoute || describe(p.Route) != tt.want {
				t.Fatalf("kind %s, %q; want %q", p.Kind(), describe(p.Route), tt.want)
			}
			out, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			again, err := config.Parse(out, "again.yml")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if again.Pools[2].Checksum() != p.Checksum() {
				t.Errorf("round trip changed the pool:\n%s", out)
			}
		})
	}
}

// FuzzRouteConfig: any route mapping parses without panic, and one that
// parses is written by Marshal and read back the same.
func FuzzRouteConfig(f *testing.F) {
	for _, s := range []string{
		"migrate:\n  from: old\n  to: new\n  phase: warm\n",
		"warm_up:\n  cold: new\n  warm: old\n",
		"migrate:\n  from: old\n  to: new\n  phase: from_only\n  at:\n    warm: 2030-01-01T00:00:00.5+01:00\n",
		"pool: old\nshadow:\n  pool: new\n  fraction: 0.5\n  queue: 3\nfailover:\n  pool: new\n  on: error\n",
		"pool: old\nshadow:\n  pool: new\n  fraction: 1e-3\n",
		"pool: [old]\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, route string) {
		var b strings.Builder
		b.WriteString(twoPools + "cache:\n  listen: 127.0.0.1:0\n  route:\n")
		for _, l := range strings.Split(route, "\n") {
			b.WriteString("    " + l + "\n")
		}
		c, err := config.Parse([]byte(b.String()), "fuzz.yml")
		if err != nil {
			return
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := config.Parse(out, "again.yml")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		for i, p := range c.Pools {
			if again.Pools[i].Checksum() != p.Checksum() {
				t.Fatalf("round trip changed pool %s:\n%s", p.Name, out)
			}
		}
	})
}

// A pool a route names may have no listen; it gets no listener.
func TestConfigRoutedWithoutListen(t *testing.T) {
	text := "cache:\n  listen: 127.0.0.1:0\n  route:\n    pool: inner\ninner:\n  servers:\n    - 127.0.0.1:11211:1\n"
	c, err := config.Parse([]byte(text), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(out), "listen:") != 1 {
		t.Errorf("Marshal wrote a listen for inner:\n%s", out)
	}
	if _, err := config.Parse(out, "again.yml"); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse([]byte(strings.Replace(text, "  listen: 127.0.0.1:0\n", "", 1)), "test.yml"); err == nil ||
		!strings.Contains(err.Error(), `pool "cache": listen: is missing`) {
		t.Errorf("a route pool without listen: %v", err)
	}
}
