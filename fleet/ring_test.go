package fleet

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func ids(s ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range s {
		m[id] = true
	}
	return m
}

func TestEject(t *testing.T) {
	for _, tc := range []struct {
		name    string
		live    map[string]bool
		reports map[string]map[string]bool
		want    []string
	}{
		{"none", ids("a", "b", "c"), nil, []string{}},
		{"one of three", ids("a", "b", "c"), map[string]map[string]bool{"s1": ids("a")}, []string{}},
		{"two of three", ids("a", "b", "c"), map[string]map[string]bool{"s1": ids("a", "b")}, []string{"s1"}},
		{"half is not more than half", ids("a", "b", "c", "d"), map[string]map[string]bool{"s1": ids("a", "b")}, []string{}},
		{"three of four", ids("a", "b", "c", "d"), map[string]map[string]bool{"s1": ids("a", "b", "c")}, []string{"s1"}},
		{"alone", ids("a"), map[string]map[string]bool{"s1": ids("a")}, []string{"s1"}},
		{"reports of the gone do not count", ids("a", "b", "c"), map[string]map[string]bool{"s1": ids("a", "x", "y")}, []string{}},
		{"no live proxy", ids(), map[string]map[string]bool{"s1": ids("a")}, []string{}},
		{"sorted", ids("a"), map[string]map[string]bool{"s2": ids("a"), "s1": ids("a"), "s3": ids()}, []string{"s1", "s2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Eject(tc.live, tc.reports); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Eject = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDecisions(t *testing.T) {
	v := newView()
	v.live = ids("a", "b", "c")
	if d := v.decisions(); len(d) != 0 {
		t.Fatalf("nothing reported: %v", d)
	}
	v.setHealth("cache", "s1", "a", true)
	v.setHealth("cache", "s1", "b", true)
	d := v.decisions()
	want := ringState{ring: Ring{Version: 1, Ejected: []string{"s1"}}, modRev: 0}
	if !reflect.DeepEqual(d, map[string]ringState{"cache": want}) {
		t.Fatalf("decisions %+v", d)
	}
	// Decided and read back: nothing more to write.
	v.rings["cache"] = ringState{ring: want.ring, modRev: 7}
	if d := v.decisions(); len(d) != 0 {
		t.Fatalf("after the write: %v", d)
	}
	// One report gone: restored at the next version, compared at 7.
	v.setHealth("cache", "s1", "b", false)
	d = v.decisions()
	if !reflect.DeepEqual(d["cache"], ringState{ring: Ring{Version: 2, Ejected: []string{}}, modRev: 7}) {
		t.Fatalf("restore: %+v", d)
	}
	// A value that is no ring is replaced at the next version, even when
	// the rule wants what the last valid one had.
	v.rings["cache"] = ringState{ring: Ring{Version: 2, Ejected: []string{}}, modRev: 9, bad: true}
	d = v.decisions()
	if !reflect.DeepEqual(d["cache"], ringState{ring: Ring{Version: 3, Ejected: []string{}}, modRev: 9}) {
		t.Fatalf("bad value: %+v", d)
	}
	v.setHealth("cache", "s1", "a", false)
	if len(v.health) != 0 {
		t.Fatalf("health not emptied: %v", v.health)
	}
}

func TestParseRing(t *testing.T) {
	r, err := parseRing([]byte(`{"version":3,"ejected":["b","a","a"]}`))
	if err != nil || !r.Equal(Ring{Version: 3, Ejected: []string{"a", "b"}}) {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{`{`, `{"version":0}`, `[]`, `{"version":"x"}`} {
		if _, err := parseRing([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// TestParseDir: a version from etcd is no file; its relative paths
// resolve against the proxy's working directory, not against its Source.
func TestParseDir(t *testing.T) {
	cfg, err := Parse([]byte("lp:\n  listen: 127.0.0.1:0\n  lua: routes/main.lua\n"), "/shardproxy/t", 7)
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if got, want := cfg.Path("routes/main.lua"), filepath.Join(wd, "routes/main.lua"); got != want {
		t.Fatalf("Path = %q, want %q", got, want)
	}
	if cfg.Source != "etcd:/shardproxy/t/config@7" {
		t.Fatalf("Source = %q", cfg.Source)
	}
}
