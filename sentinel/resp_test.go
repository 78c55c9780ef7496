package sentinel

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
)

func read(s string) (value, error) {
	return readValue(bufio.NewReaderSize(strings.NewReader(s), maxLine+64))
}

func TestReadValue(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string // v.strings(), or the error's text part
		err      bool
	}{
		{name: "addr", in: "*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n", want: []string{"127.0.0.1", "6379"}},
		{name: "message", in: "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$5\r\nm 1 2\r\n", want: []string{"message", "+switch-master", "m 1 2"}},
		{name: "null array", in: "*-1\r\n"},
		{name: "bad length", in: "$-2\r\n", err: true},
		{name: "bulk too long", in: "$99999999\r\n", err: true},
		{name: "no crlf after bulk", in: "$1\r\nab\r\n", err: true},
		{name: "bare lf", in: "+OK\n", err: true},
		{name: "unknown type", in: "%1\r\n", err: true},
		{name: "too deep", in: "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", err: true},
		{name: "cut", in: "*2\r\n$1\r\na\r\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := read(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error: %v", err, tt.err)
			}
			if tt.want != nil {
				got, ok := v.strings()
				if !ok || strings.Join(got, "|") != strings.Join(tt.want, "|") {
					t.Errorf("strings() = %q, %v; want %q", got, ok, tt.want)
				}
			}
		})
	}
}

func TestReadRoles(t *testing.T) {
	// ROLE replies as redis-server 7.0 and redis-sentinel answer them.
	for in, want := range map[string]string{
		"*3\r\n$6\r\nmaster\r\n:1198\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$5\r\n36002\r\n$3\r\n791\r\n": "master",
		"*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:36001\r\n$7\r\nconnect\r\n:-1\r\n":                 "slave",
		"*2\r\n$8\r\nsentinel\r\n*1\r\n$2\r\nm1\r\n":                                                 "sentinel",
	} {
		v, err := read(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if got, ok := v.arrayHead(); !ok || got != want {
			t.Errorf("%q: role %q, want %q", in, got, want)
		}
	}
}

func TestParseSwitch(t *testing.T) {
	ev, ok := parseSwitch("m1 127.0.0.1 36001 127.0.0.1 36002")
	if !ok || ev.master != "m1" || ev.addr != "127.0.0.1:36002" {
		t.Errorf("got %+v, %v", ev, ok)
	}
	for _, bad := range []string{"", "m1 a 1 b", "m1 a 1 b 0", "m1 a 1 b 70000", "m1 a 1 b 01", "m1 a 1 b/c 1",
		"m1 a 1 [ 1", "m1 a 1 [::1] 1"} {
		if _, ok := parseSwitch(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzReadValue: no panic, bounded input consumed, and every value read
// encodes back to bytes that read as the same value.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{
		"*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n", "*-1\r\n", "$-1\r\n", "+OK\r\n", "-NOAUTH x\r\n", ":12\r\n",
		"*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$34\r\nm1 127.0.0.1 36001 127.0.0.1 36002\r\n",
		"*3\r\n$6\r\nmaster\r\n:1198\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$5\r\n36002\r\n$3\r\n791\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := readValue(bufio.NewReaderSize(bytes.NewReader(b), maxLine+64))
		if err != nil {
			if !errors.Is(err, errBadReply) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		enc := appendValue(nil, v)
		v2, err := readValue(bufio.NewReaderSize(bytes.NewReader(enc), maxLine+64))
		if err != nil {
			t.Fatalf("re-read %q: %v", enc, err)
		}
		if enc2 := appendValue(nil, v2); !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip: %q then %q", enc, enc2)
		}
	})
}

// FuzzParseSwitch: no panic, and an accepted payload names a master and a
// host:port whose port is 1-65535.
func FuzzParseSwitch(f *testing.F) {
	for _, s := range []string{"m1 127.0.0.1 36001 127.0.0.1 36002", "m ::1 1 ::1 2", "a b c d e", "m h 1 h 65536"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ev, ok := parseSwitch(s)
		if !ok {
			return
		}
		host, port, err := net.SplitHostPort(ev.addr)
		if ev.master == "" || err != nil || host == "" {
			t.Fatalf("%q -> %+v (%v)", s, ev, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			t.Fatalf("%q -> port %q", s, port)
		}
	})
}
