package proxy

import (
	"fmt"
	"testing"

	"shardproxy/resp"
)

func trackingOf(bcast bool) resp.Tracking { return resp.Tracking{On: true, BCAST: bcast} }

// BenchmarkTrackerWrite is the tracker's work for one write on a server
// (an invalidation of a key no client read) while many clients track in
// the default mode and a few in BCAST mode: only the BCAST clients'
// prefixes are matched, so its cost does not grow with the default-mode
// clients.
func BenchmarkTrackerWrite(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprint(n, "-clients"), func(b *testing.B) {
			t := &tracker{clients: map[*trackState]struct{}{}, bcast: map[*trackState]struct{}{}}
			c := &invConn{t: t, table: map[string][]*trackState{}}
			for i := range n {
				ts := &trackState{t: t}
				t.clients[ts] = struct{}{}
				if i < 2 {
					ts.bcast, ts.prefixes = true, []string{"session:"}
					t.bcast[ts] = struct{}{}
				}
			}
			keys := [][]byte{[]byte("user:1")}
			b.ReportAllocs()
			for b.Loop() {
				c.invalidate(keys)
			}
		})
	}
}

// TestTrackerBCASTSet: the tracker matches prefixes for exactly the
// clients whose last CLIENT TRACKING asked for BCAST, until they leave.
func TestTrackerBCASTSet(t *testing.T) {
	tr := &tracker{clients: map[*trackState]struct{}{}, bcast: map[*trackState]struct{}{}}
	a, d := &trackState{t: tr, keys: map[*invConn]map[string]struct{}{}}, &trackState{t: tr, keys: map[*invConn]map[string]struct{}{}}
	tr.clients[a], tr.clients[d] = struct{}{}, struct{}{}
	tr.set(a, trackingOf(true))
	tr.set(d, trackingOf(false))
	if _, ok := tr.bcast[a]; !ok || len(tr.bcast) != 1 {
		t.Fatalf("after BCAST for one client: bcast holds %d clients, the BCAST one: %v", len(tr.bcast), ok)
	}
	tr.set(a, trackingOf(false))
	if len(tr.bcast) != 0 {
		t.Fatalf("after the client turned BCAST off: bcast holds %d clients", len(tr.bcast))
	}
	tr.set(d, trackingOf(true))
	tr.leave(d) // a stays: the tracker keeps running

	if len(tr.bcast) != 0 || len(tr.clients) != 1 {
		t.Fatalf("after a BCAST client left: bcast %d, clients %d", len(tr.bcast), len(tr.clients))
	}
}
