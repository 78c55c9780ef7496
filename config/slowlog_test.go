package config

import (
	"strings"
	"testing"
	"time"
)

// TestSlowlogKeys: the defaults, values read, and refusals naming the
// pool and the key.
func TestSlowlogKeys(t *testing.T) {
	cfg, err := Parse([]byte(pool("")), src)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pools[0]; p.SlowlogThreshold != DefaultSlowlogThreshold || p.SlowlogMaxLen != DefaultSlowlogMaxLen {
		t.Errorf("defaults: %v, %d", p.SlowlogThreshold, p.SlowlogMaxLen)
	}
	cfg, err = Parse([]byte(clusterPool("  slowlog_threshold: 25\n  slowlog_max_len: 0\n")), src)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Pools[0]; p.SlowlogThreshold != 25*time.Millisecond || p.SlowlogMaxLen != 0 {
		t.Errorf("read: %v, %d", p.SlowlogThreshold, p.SlowlogMaxLen)
	}
	const at = `config: testdata/x.yml:`
	for _, tt := range []struct{ name, text, want string }{
		{"threshold zero", pool("  slowlog_threshold: 0\n"),
			at + `3: pool "alpha": slowlog_threshold: 0 is out of range [1, 2147483647]`},
		{"threshold text", pool("  slowlog_threshold: 10ms\n"),
			at + `3: pool "alpha": slowlog_threshold: "10ms" is not a number`},
		{"length too big", pool("  slowlog_max_len: 5000\n"),
			at + `3: pool "alpha": slowlog_max_len: 5000 is out of range [0, 4096]`},
		{"hot keys too many", pool("  hot_keys: 65\n"),
			at + `3: pool "alpha": hot_keys: 65 is out of range [0, 64]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			if got := strings.Split(err.Error(), "\n")[0]; got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
