package proc

import "sync"

// outputLimit bounds what a server may print into memory; older output is
// dropped first.
const outputLimit = 64 << 10

// tail keeps the last outputLimit bytes written to it. It is safe for
// concurrent use.
type tail struct {
	mu      sync.Mutex
	buf     []byte
	dropped bool
	total   int64 // bytes ever written
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.total += int64(len(p))
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - outputLimit; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
		w.dropped = true
	}
	return len(p), nil
}

// last returns at most n trailing bytes of the output, marked when cut.
func (w *tail) last(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) <= n {
		if w.dropped {
			return "[...]\n" + string(w.buf)
		}
		return string(w.buf)
	}
	return "[...]\n" + string(w.buf[len(w.buf)-n:])
}

// mark returns a position for since: the bytes written so far.
func (w *tail) mark() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

// since returns what was written after mark, as far as it is kept.
func (w *tail) since(mark int64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(w.total-mark, int64(len(w.buf)))
	return string(w.buf[int64(len(w.buf))-n:])
}
