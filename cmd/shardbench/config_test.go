package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseRatio(t *testing.T) {
	tests := []struct {
		in       string
		set, get int
		ok       bool
	}{
		{"1:9", 1, 9, true},
		{"0:1", 0, 1, true},
		{"1:0", 1, 0, true},
		{"0:0", 0, 0, false},
		{"1", 0, 0, false},
		{"-1:2", 0, 0, false},
		{"a:b", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			set, get, err := parseRatio(tt.in)
			if (err == nil) != tt.ok || set != tt.set || get != tt.get {
				t.Errorf("parseRatio(%q) = %d, %d, %v", tt.in, set, get, err)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of the error, "" for none
	}{
		{"defaults", nil, ""},
		{"everything", []string{"-proto", "resp", "-conns", "3", "-pipeline", "8", "-keys", "50",
			"-dist", "zipf", "-value", "1000", "-ratio", "1:1", "-mget", "5", "-requests", "100",
			"-server-pid", "1,2", "-prefix", "x:", "-rate", "1000"}, ""},
		{"unknown proto", []string{"-proto", "binary"}, "-proto"},
		{"small value", []string{"-value", "8"}, "-value 8"},
		{"mget too wide", []string{"-keys", "10", "-mget", "11"}, "-mget"},
		{"bad ratio", []string{"-ratio", "9"}, "-ratio"},
		{"bad theta", []string{"-dist", "zipf", "-zipf-theta", "1"}, "-zipf-theta"},
		{"bad pid", []string{"-server-pid", "x"}, "-server-pid"},
		{"space in prefix", []string{"-prefix", "a b"}, "-prefix"},
		{"argument", []string{"extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig(tt.args, io.Discard)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("parseConfig: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("parseConfig: %v, want an error containing %q", err, tt.want)
			case err == nil && !strings.HasSuffix(c.Prefix, ":"):
				t.Errorf("prefix %q", c.Prefix)
			}
		})
	}
	a, _ := parseConfig(nil, io.Discard)
	b, _ := parseConfig(nil, io.Discard)
	if a.Prefix == b.Prefix {
		t.Errorf("two runs got the same default prefix %q", a.Prefix)
	}
}
