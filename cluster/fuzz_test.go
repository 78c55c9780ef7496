package cluster

import (
	"bytes"
	"path/filepath"
	"testing"
)

// FuzzSlotMap feeds the topology parsers (CLUSTER SHARDS and CLUSTER SLOTS
// replies) arbitrary bytes, seeded from testdata: no panic, a map only with
// valid owners and addresses, bounded work, and every strict prefix of a
// reply that parses is refused.
func FuzzSlotMap(f *testing.F) {
	files, err := filepath.Glob("testdata/*.resp")
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata: %v", err)
	}
	for _, name := range files {
		f.Add(readTestdata(f, filepath.Base(name)))
	}
	f.Add([]byte("-ERR This instance has cluster support disabled\r\n"))
	f.Add([]byte("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$0\r\n\r\n:7000\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, parse := range []func([]byte, string) (*SlotMap, error){ParseShards, ParseSlots} {
			m, err := parse(data, "10.0.0.9:7000")
			if err != nil {
				continue
			}
			checkMap(t, m)
			if len(data) > 4096 {
				continue // the prefix check is quadratic
			}
			for i := range len(data) {
				if _, err := parse(data[:i], "10.0.0.9:7000"); err == nil {
					t.Fatalf("prefix of %d bytes of %q parsed", i, data)
				}
			}
		}
		// Redirects: never a panic, and what parses names a real slot and
		// a dialable address.
		if re, ok := ParseRedirect(data, "10.0.0.9:7000"); ok {
			if re.Slot < 0 || re.Slot >= Slots || re.Addr == "" || bytes.ContainsAny([]byte(re.Addr), " \r\n") {
				t.Fatalf("redirect %+v from %q", re, data)
			}
			if _, _, ok := splitHost(re.Addr); !ok {
				t.Fatalf("redirect address %q does not split", re.Addr)
			}
		}
	})
}

// checkMap asserts what every parsed map guarantees.
func checkMap(t *testing.T, m *SlotMap) {
	t.Helper()
	for s := range Slots {
		if o := m.Owner(s); o < -1 || o >= len(m.Shards) {
			t.Fatalf("slot %d owned by %d of %d shards", s, o, len(m.Shards))
		}
	}
	for _, sh := range m.Shards {
		for _, n := range append([]Node{sh.Master}, sh.Replicas...) {
			if _, _, ok := splitHost(n.Addr); !ok || bytes.ContainsAny([]byte(n.Addr), " \r\n") {
				t.Fatalf("bad node address %q", n.Addr)
			}
		}
	}
}
