package spool

import "time"

// Replay sends server's pending keys, oldest first, through send, which
// is given at most 256 at a time and reports how many of them, from the
// first, the server answered, and an error when it answered fewer. Keys
// answered are done (an OpDone record, or the file back to its magic
// once nothing is pending anywhere); the rest stay, in order, and Replay
// returns send's error. It holds server's replay lock throughout, so a
// second socket of the same server waits for the first's replay and then
// finds nothing left to send: no socket of the server carries a request
// before its pending deletes were answered.
func (s *Spool) Replay(server string, send func(keys [][]byte) (int, error)) error {
	s.mu.Lock()
	sv := s.servers[server]
	s.mu.Unlock()
	if sv == nil {
		return nil // the common case: nothing pending
	}
	sv.replay.Lock()
	defer sv.replay.Unlock()
	for {
		keys := s.take(server, sv)
		if len(keys) == 0 {
			return nil
		}
		n, err := send(keys)
		n = max(0, min(n, len(keys)))
		s.finish(server, sv, keys, n)
		if err != nil || n < len(keys) {
			return err
		}
	}
}

// take returns the next keys of sv to send, marked as being sent.
func (s *Spool) take(name string, sv *server) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers[name] != sv {
		return nil // emptied meanwhile; a new server entry is a new replay's
	}
	keys := append([][]byte(nil), sv.keys[:min(len(sv.keys), replayBatch)]...)
	for _, k := range keys {
		if sv.queued[string(k)]--; sv.queued[string(k)] <= 0 {
			delete(sv.queued, string(k))
		}
	}
	sv.sending = len(keys)
	return keys
}

// finish records that the first n of keys, taken from sv, were answered;
// the others are pending as before.
func (s *Spool) finish(name string, sv *server, keys [][]byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys[n:] {
		sv.queued[string(k)]++
	}
	s.replayed.Add(int64(n))
	s.replayFailed.Add(int64(len(keys) - n))
	if n == 0 {
		sv.sending = 0
		return
	}
	sv.sending = n // pop's first n are the sent ones, not in queued
	s.pop(name, n)
	sv.sending = 0
	if s.closed {
		return
	}
	if s.pending.Load() == 0 {
		if err := s.rewrite(); err != nil {
			s.log.Error("spool compaction failed", "err", err)
		}
		return
	}
	s.buf = AppendRecord(s.buf[:0], Record{Op: OpDone, Server: name, Count: uint32(n)})
	if err := s.write(s.buf, false); err != nil {
		s.log.Error("spool write failed", "err", err)
	}
}

// Reconfigure applies cfg's bound and sync policy to a running spool (a
// reload that keeps its path); cfg.Path and Logger are ignored.
func (s *Spool) Reconfigure(cfg Config) {
	s.mu.Lock()
	cfg.Path, cfg.Logger = s.cfg.Path, s.cfg.Logger
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	same := cfg == s.cfg
	if !same && s.stopSync != nil {
		close(s.stopSync)
		s.stopSync = nil
	}
	s.setConfig(cfg)
	s.mu.Unlock()
	if !same {
		s.startSync()
	}
}

// startSync starts FsyncInterval's syncer, when that is the policy.
func (s *Spool) startSync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg.Fsync != FsyncInterval || s.closed || s.stopSync != nil {
		return
	}
	stop := make(chan struct{})
	s.stopSync = stop
	go s.syncEvery(s.cfg.Interval, stop)
}

// syncEvery syncs the file every interval when something was appended,
// until stop closes.
func (s *Spool) syncEvery(interval time.Duration, stop chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		if s.dirty && !s.closed {
			s.dirty = false
			if err := s.f.Sync(); err != nil {
				s.log.Error("spool sync failed", "err", err)
			}
		}
		s.mu.Unlock()
	}
}
