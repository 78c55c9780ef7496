package config

import (
	"strings"
	"testing"
)

func TestParseServer(t *testing.T) {
	tests := []struct {
		line string
		want Server
	}{
		// The node-name rule of twemproxy's conf_add_server.
		{"127.0.0.1:11211:1", Server{Network: "tcp", Addr: "127.0.0.1:11211", Host: "127.0.0.1", Port: 11211, Weight: 1, Name: "127.0.0.1"}},
		{"127.0.0.1:11212:1", Server{Network: "tcp", Addr: "127.0.0.1:11212", Host: "127.0.0.1", Port: 11212, Weight: 1, Name: "127.0.0.1:11212"}},
		{"127.0.0.1:11211:1 mc1", Server{Network: "tcp", Addr: "127.0.0.1:11211", Host: "127.0.0.1", Port: 11211, Weight: 1, Name: "mc1"}},
		{"127.0.0.1:6380:3 server1", Server{Network: "tcp", Addr: "127.0.0.1:6380", Host: "127.0.0.1", Port: 6380, Weight: 3, Name: "server1"}},
		{"cache.example.com:11211:100000", Server{Network: "tcp", Addr: "cache.example.com:11211", Host: "cache.example.com", Port: 11211, Weight: 100000, Name: "cache.example.com"}},
		{"/tmp/mc.sock:1", Server{Network: "unix", Addr: "/tmp/mc.sock", Host: "/tmp/mc.sock", Weight: 1, Name: "/tmp/mc.sock:"}},
		{"/tmp/mc.sock:2 local", Server{Network: "unix", Addr: "/tmp/mc.sock", Host: "/tmp/mc.sock", Weight: 2, Name: "local"}},
		// The port is compared as a number, but the name keeps the text.
		{"h:011211:1", Server{Network: "tcp", Addr: "h:11211", Host: "h", Port: 11211, Weight: 1, Name: "h"}},
		{"h:06379:1", Server{Network: "tcp", Addr: "h:6379", Host: "h", Port: 6379, Weight: 1, Name: "h:06379"}},
		// Parsed from the end, so bare IPv6 works; brackets are removed
		// from Host but stay in the name.
		{"::1:6379:1", Server{Network: "tcp", Addr: "[::1]:6379", Host: "::1", Port: 6379, Weight: 1, Name: "::1:6379"}},
		{"[::1]:6379:1", Server{Network: "tcp", Addr: "[::1]:6379", Host: "::1", Port: 6379, Weight: 1, Name: "[::1]:6379"}},
		{"fe80::1%eth0:11211:1", Server{Network: "tcp", Addr: "[fe80::1%eth0]:11211", Host: "fe80::1%eth0", Port: 11211, Weight: 1, Name: "fe80::1%eth0"}},
		{"h:1:2 a:b", Server{Network: "tcp", Addr: "h:1", Host: "h", Port: 1, Weight: 2, Name: "a:b"}},
		{"h:65535:2147483647", Server{Network: "tcp", Addr: "h:65535", Host: "h", Port: 65535, Weight: 2147483647, Name: "h:65535"}},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			got, msg := parseServer(tt.line)
			if msg != "" {
				t.Fatalf("parseServer(%q): %s", tt.line, msg)
			}
			if got != tt.want {
				t.Errorf("parseServer(%q)\n got %+v\nwant %+v", tt.line, got, tt.want)
			}
		})
	}
}

func TestParseServerErrors(t *testing.T) {
	tests := []struct {
		line, want string
	}{
		{"", `"" has no weight`},
		{"127.0.0.1", `"127.0.0.1" has no weight`},
		{"127.0.0.1:1", `"127.0.0.1:1" has no port`},
		{"127.0.0.1:11211:0", `zero weight in "127.0.0.1:11211:0"`},
		{"127.0.0.1:11211:-1", `invalid weight "-1"`},
		{"127.0.0.1:11211:x", `invalid weight "x"`},
		{"127.0.0.1:11211:", `invalid weight ""`},
		{"127.0.0.1:11211:2147483648", `invalid weight "2147483648"`},
		{"127.0.0.1:11211:1 name with space", `invalid weight "1 name with"`},
		{"127.0.0.1:11211:1 ", `empty name after the space`},
		{"127.0.0.1:0:1", `invalid port "0"`},
		{"127.0.0.1:65536:1", `invalid port "65536"`},
		{"127.0.0.1:+80:1", `invalid port "+80"`},
		{":11211:1", `invalid host ""`},
		{"[::1:11211:1", `invalid host "[::1"`},
		{"a:b:11211:1", `invalid host "a:b"`},
		{"/tmp/a:b:1", `unix socket path in "/tmp/a:b:1" contains ':'`},
		{"/tmp/sock:0", `zero weight`},
		{"/tmp/sock", `has no weight`},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			s, msg := parseServer(tt.line)
			if msg == "" {
				t.Fatalf("parseServer(%q) = %+v, want error %q", tt.line, s, tt.want)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("parseServer(%q) error %q, want it to contain %q", tt.line, msg, tt.want)
			}
		})
	}
}

func TestParseListen(t *testing.T) {
	tests := []struct {
		in   string
		want Listen
	}{
		{"127.0.0.1:22121", Listen{Network: "tcp", Addr: "127.0.0.1:22121"}},
		{"127.0.0.1:0", Listen{Network: "tcp", Addr: "127.0.0.1:0"}}, // extension: any free port
		{"0.0.0.0:22121", Listen{Network: "tcp", Addr: "0.0.0.0:22121"}},
		{":22121", Listen{Network: "tcp", Addr: ":22121"}},
		{"localhost:022121", Listen{Network: "tcp", Addr: "localhost:22121"}},
		{"::1:22121", Listen{Network: "tcp", Addr: "[::1]:22121"}},
		{"[::1]:22121", Listen{Network: "tcp", Addr: "[::1]:22121"}},
		{"[::]:22121", Listen{Network: "tcp", Addr: "[::]:22121"}},
		{"/tmp/gamma", Listen{Network: "unix", Addr: "/tmp/gamma"}},
		{"/tmp/gamma 0666", Listen{Network: "unix", Addr: "/tmp/gamma", Perm: 0o666}},
		{"/tmp/gamma 600", Listen{Network: "unix", Addr: "/tmp/gamma", Perm: 0o600}},
		{"/tmp/gamma 0777", Listen{Network: "unix", Addr: "/tmp/gamma", Perm: 0o777}},
		{"/tmp/my sock 0660", Listen{Network: "unix", Addr: "/tmp/my sock", Perm: 0o660}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, msg := parseListen(tt.in)
			if msg != "" {
				t.Fatalf("parseListen(%q): %s", tt.in, msg)
			}
			if got != tt.want {
				t.Errorf("parseListen(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseListenErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "is empty"},
		{"localhost", `"localhost" has no port`},
		{"127.0.0.1:65536", `invalid port "65536"`},
		{"127.0.0.1:http", `invalid port "http"`},
		{"127.0.0.1:", `invalid port ""`},
		{"127.0.0.1 :22121", `invalid host "127.0.0.1 "`},
		{"a:b:22121", `invalid host "a:b"`},
		{"/tmp/gamma 0999", `invalid permission "0999"`},
		{"/tmp/gamma 1000", `invalid permission "1000"`},
		{"/tmp/gamma 01000", `invalid permission "01000"`},
		{"/tmp/gamma -1", `invalid permission "-1"`},
		{"/tmp/gamma ", `invalid permission ""`},
		{"/tmp/my sock", `invalid permission "sock"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			l, msg := parseListen(tt.in)
			if msg == "" {
				t.Fatalf("parseListen(%q) = %+v, want error %q", tt.in, l, tt.want)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("parseListen(%q) error %q, want it to contain %q", tt.in, msg, tt.want)
			}
		})
	}
}
