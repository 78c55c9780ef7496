package shard

import (
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/route"
)

func TestNearEffectOf(t *testing.T) {
	d, _ := codec.Lookup("memcache")
	for _, tt := range []struct {
		req  string
		meta bool
		want nearEffect
	}{
		{"get k\r\n", false, nearGet},
		{"get k\r\n", true, nearGet},
		{"gets k\r\n", false, nearGets},
		{"gets k\r\n", true, nearGets},
		{"get a b\r\n", false, nearNone},
		{"gat 10 k\r\n", false, nearTouch},
		{"gats 10 a b\r\n", false, nearTouch},
		{"set k 0 0 1\r\nv\r\n", false, nearWrite},
		{"set k 0 0 1 noreply\r\nv\r\n", false, nearWrite},
		{"cas k 0 0 1 5\r\nv\r\n", false, nearWrite},
		{"incr k 1\r\n", false, nearWrite},
		{"touch k 1\r\n", false, nearWrite},
		{"delete k\r\n", false, nearWrite},
		{"ms k 1 q\r\nv\r\n", false, nearWrite},
		{"md k\r\n", false, nearWrite},
		{"ma k N0\r\n", false, nearWrite},
		{"mg k v\r\n", false, nearNone},
		{"mg k s v t f\r\n", false, nearNone},
		{"mg k v T30\r\n", false, nearWrite},
		{"mg k N30 v\r\n", false, nearWrite},
		{"mg N v\r\n", false, nearNone}, // the key is N
		{"me k\r\n", false, nearNone},
		{"flush_all\r\n", false, nearFlush},
		{"flush_all 0 noreply\r\n", false, nearFlush},
	} {
		p := d.NewRequestParser(codec.Options{MetaGets: tt.meta})
		var req codec.Request
		if _, err := p.ParseRequest([]byte(tt.req), &req); err != nil {
			t.Fatalf("%q: %v", tt.req, err)
		}
		if got := nearEffectOf(&req); got != tt.want {
			t.Errorf("%q (meta %t): %d, want %d", tt.req, tt.meta, got, tt.want)
		}
	}
}

type nopOwner struct{}

func (nopOwner) Received(*route.Exchange, int) {}
func (nopOwner) Answered(*route.Exchange)      {}

// A get the near cache answers allocates nothing once the Exchange's
// storage has grown.
func TestNearHitAllocs(t *testing.T) {
	pc := &config.Pool{NearCache: 1, NearCacheTTL: time.Minute, ItemSizeMax: 1 << 20}
	r := &nearRouter{cache: newNearCache(pc, nil)}
	defer r.cache.release()
	r.cache.fill([]byte("k"), []byte("a value"), 3, r.cache.ticket([]byte("k")))
	d, _ := codec.Lookup("memcache")
	p := d.NewRequestParser(codec.Options{})
	var x route.Exchange
	x.Init(nopOwner{})
	in := []byte("get k\r\n")
	allocs := testing.AllocsPerRun(100, func() {
		x.Reset()
		if _, err := p.ParseRequest(in, &x.Req); err != nil {
			t.Fatal(err)
		}
		r.Route(&x)
	})
	if got := string(x.Out()); got != "VALUE k 3 7\r\na value\r\nEND\r\n" {
		t.Fatalf("answer %q", got)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per hit", allocs)
	}
}
