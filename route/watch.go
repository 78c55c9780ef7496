package route

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
)

// Watchable is a Router with an event log clients may follow (memcached's
// watch command, a codec.RouteWatch request). The session asks for a
// Watcher, answers the request, reads no more requests from that client
// and writes it the watcher's lines until either side closes.
type Watchable interface {
	// Watch registers a watcher of the given streams (codec.Watch* bits).
	Watch(streams int) (*Watcher, error)
}

// ReloadWatcher is a Router whose watchers hear of the server's reloads
// (memcached's proxy writes "type=proxy_conf status=done|failed" lines to
// its proxyevents watchers). The server calls it with its lock held, so
// it must not block.
type ReloadWatcher interface {
	// Reloaded tells a router of the generation a reload made that it
	// now serves.
	Reloaded()
	// ReloadFailed tells a running router that a reload failed, and why:
	// it goes on serving.
	ReloadFailed(err error)
}

// Hub limits: memcached's (WATCHER_LIMIT, logger_watcher_buf_size).
const (
	// MaxWatchers is how many watchers a Hub takes at once.
	MaxWatchers = 20
	// WatchBuffer bounds the bytes a watcher holds that its client has
	// not read yet; lines past it are dropped and counted.
	WatchBuffer = 256 << 10
)

// ErrTooManyWatchers refuses a watcher past MaxWatchers.
var ErrTooManyWatchers = errors.New("route: log watcher limit reached")

// Hub fans a router's log lines out to the clients watching them.
// Publishing never blocks: a watcher whose client reads too slowly loses
// the lines that do not fit its buffer, and its next line that fits is
// preceded by "skipped=N\n" (N lines lost), as memcached's watchers are.
// The zero Hub is ready to use; it is safe for concurrent use, and a
// router keeps its Hub across a reload so its watchers stay.
type Hub struct {
	mu       sync.Mutex
	watchers atomic.Pointer[[]*Watcher] // copy on write, under mu
	mask     atomic.Int32               // the streams someone watches
	gid      atomic.Uint64
}

// Watching reports whether some watcher follows one of streams: a
// publisher skips making a line nobody reads.
func (h *Hub) Watching(streams int) bool { return int(h.mask.Load())&streams != 0 }

// NextID numbers a line (memcached's gid): 1, 2, ... over the Hub's life.
func (h *Hub) NextID() uint64 { return h.gid.Add(1) }

// Publish offers line (ending in "\n") to every watcher of stream.
func (h *Hub) Publish(stream int, line []byte) {
	ws := h.watchers.Load()
	if ws == nil {
		return
	}
	for _, w := range *ws {
		if w.streams&stream != 0 {
			w.offer(line)
		}
	}
}

// Watch registers a watcher of streams (a Watchable's answer).
func (h *Hub) Watch(streams int) (*Watcher, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var cur []*Watcher
	if ws := h.watchers.Load(); ws != nil {
		cur = *ws
	}
	if len(cur) >= MaxWatchers {
		return nil, ErrTooManyWatchers
	}
	w := &Watcher{h: h, streams: streams, ready: make(chan struct{}, 1)}
	next := append(append(make([]*Watcher, 0, len(cur)+1), cur...), w)
	h.set(next)
	return w, nil
}

// set publishes ws and the union of their streams; h.mu is held.
func (h *Hub) set(ws []*Watcher) {
	mask := 0
	for _, w := range ws {
		mask |= w.streams
	}
	h.watchers.Store(&ws)
	h.mask.Store(int32(mask))
}

// remove unregisters w.
func (h *Hub) remove(w *Watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.watchers.Load()
	if ws == nil {
		return
	}
	next := make([]*Watcher, 0, len(*ws))
	for _, o := range *ws {
		if o != w {
			next = append(next, o)
		}
	}
	h.set(next)
}

// Watcher is one client's subscription to a Hub: a bounded buffer of
// lines, filled by publishers and drained by the client's session.
type Watcher struct {
	h       *Hub
	streams int
	ready   chan struct{} // cap 1: lines arrived or the watcher closed

	mu      sync.Mutex
	buf     []byte
	skipped uint64
	closed  bool
	dropped atomic.Uint64 // every line skipped, over the watcher's life
}

// Dropped returns how many lines the watcher has lost because its client
// read too slowly, over its life.
func (w *Watcher) Dropped() uint64 { return w.dropped.Load() }

// offer appends line unless it does not fit, which counts it as skipped.
func (w *Watcher) offer(line []byte) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	var skip []byte
	if w.skipped > 0 {
		skip = strconv.AppendUint([]byte("skipped="), w.skipped, 10)
		skip = append(skip, '\n')
	}
	if len(w.buf)+len(skip)+len(line) > WatchBuffer {
		w.skipped++
		w.dropped.Add(1)
		w.mu.Unlock()
		return
	}
	w.buf = append(append(w.buf, skip...), line...)
	w.skipped = 0
	w.mu.Unlock()
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

// Next waits for lines and appends them to dst; false once the watcher is
// closed (what it held is dropped).
func (w *Watcher) Next(dst []byte) ([]byte, bool) {
	for {
		w.mu.Lock()
		if w.closed {
			w.mu.Unlock()
			return dst, false
		}
		if len(w.buf) > 0 {
			dst = append(dst, w.buf...)
			w.buf = w.buf[:0]
			if cap(w.buf) > 64<<10 {
				w.buf = nil
			}
			w.mu.Unlock()
			return dst, true
		}
		w.mu.Unlock()
		<-w.ready
	}
}

// Close unregisters the watcher and wakes a Next waiting on it. It may be
// called more than once, from any goroutine.
func (w *Watcher) Close() {
	w.mu.Lock()
	was := w.closed
	w.closed = true
	w.buf = nil
	w.mu.Unlock()
	if was {
		return
	}
	w.h.remove(w)
	select {
	case w.ready <- struct{}{}:
	default:
	}
}
