package backend

import "testing"

func TestBufferClasses(t *testing.T) {
	for _, tt := range []struct{ n, wantCap int }{
		{1, minPooled}, {minPooled, minPooled}, {minPooled + 1, 2 * minPooled},
		{100 << 10, 128 << 10}, {maxPooled, maxPooled}, {maxPooled + 1, maxPooled + 1},
	} {
		b := GetBuffer(tt.n)
		if len(b) != 0 || cap(b) != tt.wantCap {
			t.Errorf("GetBuffer(%d): len %d cap %d, want 0 and %d", tt.n, len(b), cap(b), tt.wantCap)
		}
		PutBuffer(b)
	}
	// A buffer of another capacity is not kept: a later GetBuffer must
	// never hand out less room than asked for.
	PutBuffer(make([]byte, 0, 100<<10))
	for range 100 {
		if b := GetBuffer(128 << 10); cap(b) < 128<<10 {
			t.Fatalf("GetBuffer(128 KiB) returned cap %d", cap(b))
		}
	}
}

// TestReplaceKeepsInAPooledClass moves more bytes than the size asked for
// to a new read buffer: the buffer must hold them from the start, in one
// of the pools' classes (a buffer that append grew is neither recycled nor
// cheap), with the bytes intact.
func TestReplaceKeepsInAPooledClass(t *testing.T) {
	old := GetBuffer(128 << 10)
	for i := range 120 << 10 {
		old = append(old, byte(i%251))
	}
	r := reader{buf: old, pooled: false} // a reply took it
	keep := 40 << 10
	r.replace(readChunk, keep)
	if i, ok := poolClass(cap(r.buf)); !ok || cap(r.buf) != minPooled<<i || cap(r.buf) < keep {
		t.Fatalf("new buffer cap %d: not a pool class holding %d bytes", cap(r.buf), keep)
	}
	if len(r.buf) != keep || string(r.buf) != string(old[len(old)-keep:]) {
		t.Fatalf("kept %d bytes, want the last %d of the old buffer", len(r.buf), keep)
	}
}
