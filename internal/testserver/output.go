package testserver

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
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
