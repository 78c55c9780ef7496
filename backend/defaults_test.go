package backend

import (
	"testing"
	"time"
)

// New fills a zero field with its documented default and keeps a set one.
func TestNewDefaults(t *testing.T) {
	tests := []struct {
		name           string
		cfg            Config
		connect, retry time.Duration
		conns          int
		wantName       string
	}{
		{"zero", Config{Addr: "127.0.0.1:1"}, DefaultConnectTimeout, DefaultRetryTimeout, 1, "127.0.0.1:1"},
		{"set", Config{Addr: "127.0.0.1:1", Name: "n", ConnectTimeout: 3 * time.Millisecond, RetryTimeout: 7 * time.Millisecond, Conns: 2},
			3 * time.Millisecond, 7 * time.Millisecond, 2, "n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.cfg)
			defer b.Close()
			if b.cfg.ConnectTimeout != tt.connect || b.cfg.RetryTimeout != tt.retry || len(b.conns) != tt.conns || b.Name() != tt.wantName {
				t.Errorf("ConnectTimeout %v RetryTimeout %v conns %d name %q", b.cfg.ConnectTimeout, b.cfg.RetryTimeout, len(b.conns), b.Name())
			}
		})
	}
}
