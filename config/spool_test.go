package config

import (
	"errors"
	"testing"
	"time"
)

// spoolPool is a memcache pool named alpha with delete_spool's lines.
func spoolPool(lines string) string {
	return "alpha:\n  listen: 127.0.0.1:1\n  servers:\n   - 127.0.0.1:11211:1\n  delete_spool:\n" + lines
}

func TestDeleteSpool(t *testing.T) {
	c := mustParse(t, spoolPool("    path: deletes.spool\n"))
	want := DeleteSpool{Path: "deletes.spool", MaxBytes: DefaultSpoolMaxBytes, Fsync: FsyncAlways,
		FsyncInterval: DefaultSpoolFsyncInterval, Line: 5}
	if ds := c.Pools[0].DeleteSpool; ds == nil || *ds != want {
		t.Fatalf("delete_spool %+v, want %+v", ds, want)
	}
	c = mustParse(t, spoolPool("    path: /var/lib/s\n    max_bytes: 4096\n    fsync: interval\n    fsync_interval: 20\n"))
	if ds := c.Pools[0].DeleteSpool; ds.MaxBytes != 4096 || ds.Fsync != FsyncInterval || ds.FsyncInterval != 20*time.Millisecond {
		t.Fatalf("delete_spool %+v", ds)
	}
	again, text := roundTrip(t, c)
	if again.Pools[0].Checksum() != c.Pools[0].Checksum() {
		t.Errorf("round trip changed the pool:\n%s", text)
	}
}

func TestDeleteSpoolErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	tests := []struct{ name, text, want string }{
		{"not a mapping", "alpha:\n  listen: 127.0.0.1:1\n  servers:\n   - 127.0.0.1:11211:1\n  delete_spool: x\n",
			at + `5: pool "alpha": delete_spool: must be a mapping with path (and max_bytes, fsync, fsync_interval), not a single value`},
		{"no path", spoolPool("    fsync: never\n"), at + `5: pool "alpha": delete_spool: path is missing: the spool's file`},
		{"unknown key", spoolPool("    path: x\n    size: 3\n"),
			at + `7: pool "alpha": delete_spool: unknown key "size"; want path, max_bytes, fsync or fsync_interval`},
		{"bad fsync", spoolPool("    path: x\n    fsync: sometimes\n"),
			at + `7: pool "alpha": delete_spool: fsync: unknown policy "sometimes"; want always, interval or never`},
		{"small bound", spoolPool("    path: x\n    max_bytes: 100\n"),
			at + `7: pool "alpha": delete_spool: max_bytes: 100 is out of range [4096, 1099511627776]`},
		{"interval without policy", spoolPool("    path: x\n    fsync_interval: 100\n"),
			at + `7: pool "alpha": delete_spool: fsync_interval: needs fsync: interval`},
		{"duplicate", spoolPool("    path: x\n    path: y\n"), at + `7: pool "alpha": delete_spool: path: duplicate key (first at line 6)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if got := e.Error(); got != tt.want {
				t.Errorf("first error\n got %s\nwant %s\n(all: %v)", got, tt.want, err)
			}
		})
	}
}
