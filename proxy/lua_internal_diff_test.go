package proxy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"shardproxy/internal/mcdiff"
	"shardproxy/internal/testserver"
	"slices"
	"strings"
	"testing"
)

// TestLuaInternalDifferential sends mcdiff's random request sequences to a
// Lua pool answering only from its own cache (V1 mcp.internal for every
// command) and to a real memcached, and compares every reply after
// blanking what legitimately differs (cas uniques, clock seconds).
func TestLuaInternalDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("starts memcached")
	}
	for _, seed := range []uint64{11, 12, 13} {
		// See store's TestDifferential for the server's options.
		mc := testserver.StartMemcached(t, "-m", "1024", "-o", "no_lru_maintainer,no_lru_crawler")
		_, addr := startProxy(t, "lp:\n  listen: 127.0.0.1:0\n  flush_all: true\n  lua_internal_cache: 1024\n  lua: "+
			writeLua(t, internalRoutes["v1"])+"\n", "lp")
		viaProxy, err := mcdiff.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := mcdiff.Dial(mc.Addr)
		if err != nil {
			t.Fatal(err)
		}
		g := mcdiff.NewGen(seed, mcdiff.Options{})
		a, b := mcdiff.NewSession(viaProxy), mcdiff.NewSession(direct)
		refused := 0
		var history []string // the last requests and replies, for a failure's message
		for i := range 3000 {
			r := g.Next()
			if r.LongToken() {
				// How a line with a too-long key is framed is the
				// proxy parser's business (tested in memcache), not the
				// cache's.
				continue
			}
			ra, errA := a.Do(r)
			rb, err := b.Do(r)
			if err != nil {
				t.Fatalf("seed %d request %d %q to memcached: %v", seed, i, b.Wire(r), err)
			}
			history = append(history, fmt.Sprintf("%q -> %q | %q", a.Wire(r), ra, rb))
			if len(history) > 1200 {
				history = history[1:]
			}
			if errors.Is(errA, io.EOF) && string(rb) == "ERROR\r\n" {
				// An unknown command: memcached's proxy closes the
				// connection where memcached answers ERROR.
				viaProxy.Close()
				if viaProxy, err = mcdiff.Dial(addr); err != nil {
					t.Fatal(err)
				}
				a.T = viaProxy
				refused++
				continue
			}
			if errA != nil {
				t.Fatalf("seed %d request %d %q via the proxy: %v", seed, i, a.Wire(r), errA)
			}
			if bytes.Equal(mcdiff.Normalize(ra), mcdiff.Normalize(rb)) {
				continue
			}
			// A request the proxy's parser refuses never reaches the
			// cache: it gets memcached proxy's words (as from memcached's
			// own proxy: memcache/proxywords.go) where memcached gives its
			// own error.
			if proxyRefusal(ra) && isError(rb) {
				refused++
				continue
			}
			// A quiet ma that succeeds: memcached 1.6.18 shows its HD or
			// VA when it creates the item, 1.6.45 (and its proxy, and
			// this one) hides it.
			if len(ra) == 0 && bytes.HasPrefix(r.Wire, []byte("ma ")) &&
				(bytes.HasPrefix(rb, []byte("HD")) || bytes.HasPrefix(rb, []byte("VA"))) &&
				slices.ContainsFunc(bytes.Fields(r.Wire), func(f []byte) bool { return string(f) == "q" }) {
				// The cas uniques the proxy's client did not see: the store
				// numbers them as memcached does, and were they to differ,
				// the next request using them would show it.
				a.Observe(rb)
				continue
			}
			t.Fatalf("seed %d request %d %q: via the proxy %q, memcached %q; before:\n%s", seed, i, a.Wire(r), ra, rb,
				strings.Join(history, "\n"))
		}
		t.Logf("seed %d: 3000 requests, %d refused by the proxy's parser", seed, refused)
		viaProxy.Close()
		direct.Close()
		mc.Stop()
	}
}

// isError reports whether a memcached reply is an error line.
func isError(reply []byte) bool {
	return bytes.HasPrefix(reply, []byte("ERROR\r\n")) || bytes.HasPrefix(reply, []byte("CLIENT_ERROR ")) ||
		bytes.HasPrefix(reply, []byte("SERVER_ERROR "))
}

// proxyRefusal reports whether a reply is one of memcached proxy's own
// refusals of a request it cannot parse: the line's, or a multi-key get's
// too-long key answered in its place.
func proxyRefusal(reply []byte) bool {
	switch string(reply) {
	case "CLIENT_ERROR parsing request\r\n", "CLIENT_ERROR malformed request\r\n":
		return true
	}
	return bytes.HasPrefix(reply, []byte("CLIENT_ERROR key too long\r\n")) && bytes.HasSuffix(reply, []byte("END\r\n"))
}
