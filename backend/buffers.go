package backend

import (
	"math/bits"
	"sync"
)

// Big buffers (values of tens of kilobytes and more) are recycled: at a few
// thousand such requests a second a fresh allocation for each kept the
// garbage collector running without pause and zeroed memory that was
// about to be overwritten.
const (
	minPooled = 16 << 10 // the smallest class: a socket's read buffer
	maxPooled = 4 << 20  // buffers above it are left to the collector
)

// bufferPools[i] holds buffers of capacity minPooled<<i.
var bufferPools [9]sync.Pool

// GetBuffer returns an empty buffer with room for at least n bytes: a
// recycled one when n is in the pooled range.
func GetBuffer(n int) []byte {
	i, ok := poolClass(n)
	if !ok {
		return make([]byte, 0, n)
	}
	if b, _ := bufferPools[i].Get().(*[]byte); b != nil {
		return (*b)[:0]
	}
	return make([]byte, 0, minPooled<<i)
}

// PutBuffer hands b back for reuse. Only a buffer GetBuffer returned (its
// capacity is one of the classes) is kept; the caller must not use b, or
// anything sliced from it, afterwards.
func PutBuffer(b []byte) {
	i, ok := poolClass(cap(b))
	if !ok || cap(b) != minPooled<<i {
		return
	}
	b = b[:0]
	bufferPools[i].Put(&b)
}

// poolClass returns the smallest class that holds n bytes.
func poolClass(n int) (int, bool) {
	if n <= 0 || n > maxPooled {
		return 0, false
	}
	if n <= minPooled {
		return 0, true
	}
	return bits.Len(uint((n - 1) / minPooled)), true
}
