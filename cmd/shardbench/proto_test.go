package main

import (
	"bufio"
	"strings"
	"testing"
)

func TestEncoders(t *testing.T) {
	keys := [][]byte{[]byte("k1"), []byte("k22")}
	tests := []struct {
		proto    string
		set      string // appendSetHead("k1", 5)
		get, mul string // appendGet(k1), appendGet(k1, k22)
	}{
		{"text", "set k1 0 0 5\r\n", "get k1\r\n", "get k1 k22\r\n"},
		{"meta", "ms k1 5\r\n", "mg k1 k v\r\n", "mg k1 k v q\r\nmg k22 k v q\r\nmn\r\n"},
		{"resp", "*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$5\r\n", "*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n",
			"*3\r\n$4\r\nMGET\r\n$2\r\nk1\r\n$3\r\nk22\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.proto, func(t *testing.T) {
			p := protocols[tt.proto]()
			if got := string(p.appendSetHead(nil, keys[0], 5)); got != tt.set {
				t.Errorf("set: %q, want %q", got, tt.set)
			}
			if got := string(p.appendGet(nil, keys[:1])); got != tt.get {
				t.Errorf("get: %q, want %q", got, tt.get)
			}
			if got := string(p.appendGet(nil, keys)); got != tt.mul {
				t.Errorf("multi-get: %q, want %q", got, tt.mul)
			}
		})
	}
}

// Outcomes of a decoder call.
const (
	ok     = "ok"
	wrong  = "wrong"  // a *replyError: the stream is still in step
	broken = "broken" // any other error
)

func outcome(err error) string {
	switch {
	case err == nil:
		return ok
	case isReplyError(err):
		return wrong
	}
	return broken
}

// sentinel is appended after every in-step reply: the decoder must leave
// the stream exactly at it.
const sentinel = "NEXT\r\n"

func checkInStep(t *testing.T, r *bufio.Reader, result string) {
	t.Helper()
	if result == broken {
		return
	}
	line, err := readLine(r)
	if err != nil || string(line) != "NEXT" {
		t.Errorf("after the reply the stream is at %q (%v), want the next reply", line, err)
	}
}

func TestReadSet(t *testing.T) {
	tests := []struct {
		proto, reply, want string
	}{
		{"text", "STORED\r\n", ok},
		{"text", "NOT_STORED\r\n", wrong},
		{"text", "SERVER_ERROR out of memory\r\n", wrong},
		{"text", "ERROR\r\n", wrong},
		{"text", "VALUE x 0 1\r\n", broken},
		{"text", "STORED\n", broken},
		{"text", "STOR", broken},
		{"meta", "HD\r\n", ok},
		{"meta", "NS\r\n", wrong},
		{"meta", "CLIENT_ERROR bad data chunk\r\n", wrong},
		{"meta", "STORED\r\n", broken},
		{"resp", "+OK\r\n", ok},
		{"resp", "-ERR wrong\r\n", wrong},
		{"resp", ":1\r\n", wrong},
		{"resp", "$3\r\nabc\r\n", wrong},
		{"resp", "*2\r\n$1\r\na\r\n:2\r\n", wrong},
		{"resp", "?x\r\n", broken},
	}
	for _, tt := range tests {
		t.Run(tt.proto+" "+strings.TrimSpace(tt.reply), func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.reply + sentinel))
			err := protocols[tt.proto]().readSet(r)
			if got := outcome(err); got != tt.want {
				t.Fatalf("readSet: %s (%v), want %s", got, err, tt.want)
			}
			checkInStep(t, r, tt.want)
		})
	}
}

func TestReadGet(t *testing.T) {
	tests := []struct {
		name, proto string
		keys        string // space-separated
		reply       string
		want        string
		hits        string // "pos=value ..." as reported to hit
	}{
		{"text hit", "text", "a", "VALUE a 0 3\r\nxyz\r\nEND\r\n", ok, "0=xyz"},
		{"text hit with cas", "text", "a", "VALUE a 5 3 99\r\nxyz\r\nEND\r\n", ok, "0=xyz"},
		{"text miss", "text", "a", "END\r\n", ok, ""},
		{"text value with crlf inside", "text", "a", "VALUE a 0 4\r\n\r\nEN\r\nEND\r\n", ok, "0=\r\nEN"},
		{"text multi skips misses", "text", "a b c", "VALUE a 0 1\r\n1\r\nVALUE c 0 1\r\n3\r\nEND\r\n", ok, "0=1 2=3"},
		{"text multi out of order", "text", "a b", "VALUE b 0 1\r\n2\r\nVALUE a 0 1\r\n1\r\nEND\r\n", wrong, "1=2"},
		{"text key not asked for", "text", "a", "VALUE z 0 1\r\n1\r\nEND\r\n", wrong, ""},
		{"text server error", "text", "a b", "SERVER_ERROR backend failure: timeout\r\n", wrong, ""},
		{"text truncated data", "text", "a", "VALUE a 0 3\r\nxy", broken, ""},
		{"text data without crlf", "text", "a", "VALUE a 0 2\r\nxyz\r\nEND\r\n", broken, ""},
		{"text bad size", "text", "a", "VALUE a 0 -1\r\n", broken, ""},
		{"text garbage", "text", "a", "HELLO\r\n", broken, ""},
		{"meta hit", "meta", "a", "VA 3 ka\r\nxyz\r\n", ok, "0=xyz"},
		{"meta miss", "meta", "a", "EN\r\n", ok, ""},
		{"meta miss with key", "meta", "a", "EN ka\r\n", ok, ""},
		{"meta miss for another key", "meta", "a", "EN kb\r\n", wrong, ""},
		{"meta wrong key", "meta", "a", "VA 3 kb\r\nxyz\r\n", wrong, ""},
		{"meta error", "meta", "a", "SERVER_ERROR backend failure: markedbad\r\n", wrong, ""},
		{"meta quiet multi", "meta", "a b c", "VA 1 kb\r\n2\r\nVA 1 kc\r\n3\r\nMN\r\n", ok, "1=2 2=3"},
		{"meta quiet multi error", "meta", "a b", "SERVER_ERROR x\r\nVA 1 kb\r\n2\r\nMN\r\n", wrong, "1=2"},
		{"meta quiet multi repeated", "meta", "a b", "VA 1 ka\r\n1\r\nVA 1 ka\r\n1\r\nMN\r\n", wrong, "0=1"},
		{"meta garbage", "meta", "a", "VALUE a 0 1\r\n", broken, ""},
		{"resp hit", "resp", "a", "$3\r\nxyz\r\n", ok, "0=xyz"},
		{"resp miss", "resp", "a", "$-1\r\n", ok, ""},
		{"resp error", "resp", "a", "-ERR backend down\r\n", wrong, ""},
		{"resp wrong type", "resp", "a", "*1\r\n$1\r\nx\r\n", wrong, ""},
		{"resp mget", "resp", "a b c", "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n3\r\n", ok, "0=1 2=3"},
		{"resp mget short", "resp", "a b c", "*2\r\n$1\r\n1\r\n$1\r\n2\r\n", wrong, ""},
		{"resp mget error", "resp", "a b", "-ERR x\r\n", wrong, ""},
		{"resp mget odd element", "resp", "a b", "*2\r\n:1\r\n$1\r\n2\r\n", wrong, "1=2"},
		{"resp mget nil array", "resp", "a b", "*-1\r\n", wrong, ""},
		{"resp truncated", "resp", "a", "$5\r\nab", broken, ""},
		{"resp bad header", "resp", "a", "$x\r\n", broken, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var keys [][]byte
			for _, k := range strings.Fields(tt.keys) {
				keys = append(keys, []byte(k))
			}
			var hits []string
			r := bufio.NewReader(strings.NewReader(tt.reply + sentinel))
			err := protocols[tt.proto]().readGet(r, keys, func(pos int, v []byte) {
				hits = append(hits, itoa(pos)+"="+string(v))
			})
			if got := outcome(err); got != tt.want {
				t.Fatalf("readGet: %s (%v), want %s", got, err, tt.want)
			}
			if got := strings.Join(hits, " "); tt.want != broken && got != tt.hits {
				t.Errorf("hits %q, want %q", got, tt.hits)
			}
			checkInStep(t, r, tt.want)
		})
	}
}

// TestReadLongValue reads values larger than the read buffer.
func TestReadLongValue(t *testing.T) {
	value := strings.Repeat("v", 3*readBufferSize+7)
	replies := map[string]string{
		"text": "VALUE key 0 " + itoa(len(value)) + "\r\n" + value + "\r\nEND\r\n",
		"meta": "VA " + itoa(len(value)) + " kkey\r\n" + value + "\r\n",
		"resp": "$" + itoa(len(value)) + "\r\n" + value + "\r\n",
	}
	for proto, reply := range replies {
		t.Run(proto, func(t *testing.T) {
			r := bufio.NewReaderSize(strings.NewReader(reply+sentinel), readBufferSize)
			got := ""
			err := protocols[proto]().readGet(r, [][]byte{[]byte("key")}, func(_ int, v []byte) { got = string(v) })
			if err != nil || got != value {
				t.Fatalf("readGet: %v, value of %d bytes", err, len(got))
			}
			checkInStep(t, r, ok)
		})
	}
}
