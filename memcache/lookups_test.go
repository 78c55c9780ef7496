package memcache

import (
	"bytes"
	"testing"

	"shardproxy/codec"
)

func TestLookupsAndHits(t *testing.T) {
	d := &Dialect{}
	tests := []struct {
		name, req, reply string
		keys, hits       int
		store            bool
	}{
		{"get hit", "get a\r\n", "VALUE a 0 1\r\nx\r\nEND\r\n", 1, 1, false},
		{"get miss", "get a\r\n", "END\r\n", 1, 0, false},
		{"multi-get", "gets a b c\r\n", "VALUE a 0 3 1\r\nEND\r\nVALUE c 0 0 2\r\n\r\nEND\r\n", 3, 2, false},
		{"big head", "get a\r\n", "VALUE a 0 100000\r\nxx", 1, 1, false},
		{"error", "get a\r\n", "SERVER_ERROR backend failure\r\n", 1, 0, false},
		{"mg hit", "mg a v\r\n", "VA 1\r\nx\r\n", 1, 1, false},
		{"mg hd", "mg a\r\n", "HD\r\n", 1, 1, false},
		{"mg miss", "mg a v\r\n", "EN\r\n", 1, 0, false},
		{"mg quiet miss", "mg a v q\r\n", "", 1, 0, false},
		{"set", "set a 0 0 1\r\nx\r\n", "STORED\r\n", 0, 0, true},
		{"ms", "ms a 1\r\nx\r\n", "HD\r\n", 0, 0, true},
		{"delete", "delete a\r\n", "DELETED\r\n", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req codec.Request
			if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte(tt.req), &req); err != nil {
				t.Fatal(err)
			}
			keys, store := d.Lookups(&req)
			if keys != tt.keys || store != tt.store {
				t.Errorf("Lookups = %d, %v; want %d, %v", keys, store, tt.keys, tt.store)
			}
			if tt.keys > 0 {
				if got := d.Hits(&req, []byte(tt.reply)); got != tt.hits {
					t.Errorf("Hits = %d, want %d", got, tt.hits)
				}
			}
		})
	}
}

// FuzzHits checks that Hits never panics and counts no more hits than
// the reply has VALUE headers.
func FuzzHits(f *testing.F) {
	f.Add([]byte("VALUE a 0 1\r\nx\r\nVALUE b 0 1 5\r\ny\r\nEND\r\n"))
	f.Add([]byte("VALUE a 0 99999999999\r\n"))
	f.Add([]byte("VALUE a 0 -1\r\nVALUE"))
	d := &Dialect{}
	var req codec.Request
	if _, err := d.NewRequestParser(codec.Options{}).ParseRequest([]byte("get a b\r\n"), &req); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, reply []byte) {
		if n, max := d.Hits(&req, reply), bytes.Count(reply, []byte("VALUE ")); n > max {
			t.Fatalf("%d hits in %q", n, reply)
		}
	})
}
