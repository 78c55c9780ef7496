package backend

import (
	"net"
	"time"

	"shardproxy/codec"
)

// Replayer sends what a server must hear on a new socket before the
// socket carries a call (Config.Replay): a pool's spooled deletes.
type Replayer interface {
	// Replay is given the backend's name and send, which writes reqs on
	// the new socket and reads their replies in order, within the
	// backend's ConnectTimeout from each call; it returns the replies'
	// kinds up to the first it could not read, and then an *Error. A
	// non-nil result drops the socket. It runs on a socket's dialling
	// goroutine, once per new socket; several sockets of a backend may
	// run it at once.
	Replay(name string, send func(reqs []*codec.Request) ([]codec.ReplyKind, error)) error
}

// replay runs Config.Replay on nc, a validated socket no call has used,
// and reports whether it succeeded.
func (b *Backend) replay(nc net.Conn) bool {
	var buf []byte
	send := func(reqs []*codec.Request) ([]codec.ReplyKind, error) {
		nc.SetDeadline(time.Now().Add(b.cfg.ConnectTimeout))
		defer nc.SetDeadline(time.Time{})
		if _, err := nc.Write(joinWire(reqs)); err != nil {
			return nil, errs[CauseWriting]
		}
		kinds := make([]codec.ReplyKind, 0, len(reqs))
		for _, r := range reqs {
			n, kind, cause, ok := readHandshakeReply(nc, b.cfg.Dialect, r, &buf)
			if !ok {
				return kinds, errs[cause]
			}
			kinds = append(kinds, kind)
			buf = buf[:copy(buf, buf[n:])]
		}
		return kinds, nil
	}
	if err := b.cfg.Replay.Replay(b.cfg.Name, send); err != nil {
		b.log.Debug("backend replay failed", "err", err)
		return false
	}
	return true
}
