package proxy

import (
	"errors"
	"os"
	"time"

	"shardproxy/codec"
	"shardproxy/route"
)

// A watch request (codec.RouteWatch, memcached's "watch proxyreqs ...")
// turns its session into a stream of the pool's event log: the session
// answers it, reads no more requests (what the client sends is read and
// ignored, as memcached ignores it) and writes the watcher's lines as they
// come, until the client leaves or the session stops. The router keeps
// the watcher's lines in a bounded buffer and drops what does not fit
// (route.Hub), so a client that reads slowly never holds the proxy up.

// startWatch answers a watch request: OK and a watcher when the pool's
// router has an event log, an error otherwise.
func (s *session) startWatch(p *pending) {
	pl := s.p
	wa, ok := pl.router.(route.Watchable)
	if !ok {
		p.Answer(pl.dialect.AppendError(p.Out(), codec.ErrClient, "watch is not supported by this pool"))
		return
	}
	w, err := wa.Watch(p.Req.Arg)
	if err != nil {
		p.Answer(pl.dialect.AppendError(p.Out(), codec.ErrServer, err.Error()))
		return
	}
	s.watcher = w
	p.Answer(pl.dialect.AppendLocal(p.Out(), &p.Req, pl))
}

// watchWriteTimeout bounds one write of watch lines: a client that reads
// nothing for that long is dropped.
const watchWriteTimeout = 30 * time.Second

// streamWatch writes the watcher's lines until the client closes, a write
// fails or the session stops. The reader's earlier replies are written
// (serve quiesced first).
func (s *session) streamWatch() {
	w := s.watcher
	defer w.Close()
	done := make(chan struct{})
	defer func() { <-done }()
	go func() { // notices the client leaving, and stop
		defer close(done)
		buf := make([]byte, 512)
		for {
			_, err := s.nc.Read(buf)
			if err == nil {
				continue
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && !s.closing.Load() && !s.draining.Load() {
				s.nc.SetReadDeadline(time.Time{})            // the reader's FIN check
				if !s.closing.Load() && !s.draining.Load() { // stop and drain set their flag, then the deadline
					continue
				}
			}
			w.Close()
			s.nc.SetWriteDeadline(time.Now()) // a write stuck on a client that does not read
			return
		}
	}()
	var out []byte
	for {
		var ok bool
		if out, ok = w.Next(out[:0]); !ok {
			break
		}
		s.nc.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
		if _, err := s.nc.Write(out); err != nil {
			break
		}
	}
	s.nc.SetReadDeadline(time.Now()) // ends the goroutine
}
