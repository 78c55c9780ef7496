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
