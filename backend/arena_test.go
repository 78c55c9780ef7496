package backend

import "testing"

// TestArenaRefs checks an arena's count through carving, the socket
// moving on, and the replies' releases: it reaches zero, and so goes back
// to the pool, exactly when the socket and every carved reply have let go.
func TestArenaRefs(t *testing.T) {
	s := &sock{}
	var got []*arena
	for range 3 {
		_, a := s.carve(100)
		got = append(got, a)
	}
	a := got[0]
	if got[1] != a || got[2] != a {
		t.Fatal("small replies were carved from different chunks")
	}
	a.release() // a reply let go while the socket still carves
	s.dropArena()
	if n := a.refs.Load(); n != 2 {
		t.Fatalf("after the socket left, %d references, want the 2 unreleased replies", n)
	}
	a.release()
	if n := a.refs.Load(); n != 1 {
		t.Fatalf("%d references, want 1", n)
	}
	a.release()
	if n := a.refs.Load(); n != 0 {
		t.Fatalf("%d references after every release, want 0", n)
	}

	// A full chunk: the next reply takes a new one, and the old one keeps
	// a reference per reply carved from it.
	_, first := s.carve(arenaMax)
	for cap(first.buf)-len(first.buf) >= arenaMax {
		s.carve(arenaMax)
	}
	_, next := s.carve(arenaMax)
	if next == first {
		t.Fatal("a full chunk was carved from again")
	}
	if n, want := first.refs.Load(), int32(arenaSize/arenaMax); n != want {
		t.Fatalf("the full chunk holds %d references, want %d (one per reply)", n, want)
	}
	s.dropArena()
	if n := next.refs.Load(); n != 1 {
		t.Fatalf("the new chunk holds %d references after the socket left, want 1", n)
	}
}
