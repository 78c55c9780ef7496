package spool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Fsync says when appended records reach the disk.
type Fsync uint8

// Fsync policies.
const (
	// FsyncAlways syncs every append before Append returns.
	FsyncAlways Fsync = iota
	// FsyncInterval syncs every Config.Interval when something was
	// appended since the last sync.
	FsyncInterval
	// FsyncNever leaves the writing back to the kernel.
	FsyncNever
)

// Defaults of a zero Config's fields.
const (
	// DefaultMaxBytes bounds the file when Config.MaxBytes is 0.
	DefaultMaxBytes = 64 << 20
	// DefaultInterval is FsyncInterval's period when Config.Interval is 0.
	DefaultInterval = time.Second
)

// replayBatch is how many keys one call of Replay's send is given.
const replayBatch = 256

// Config describes a spool.
type Config struct {
	// Path is the file; required. It is created if missing.
	Path string
	// MaxBytes bounds the file; 0 means DefaultMaxBytes. An append that
	// would pass it first compacts the file when the pending records take
	// less than half of it; else the record is dropped and counted.
	MaxBytes int64
	// Fsync is the sync policy; the zero value is FsyncAlways.
	Fsync Fsync
	// Interval is FsyncInterval's period; 0 means DefaultInterval.
	Interval time.Duration
	// Logger receives the cut of a corrupt tail and the first drop at the
	// bound; default slog.Default().
	Logger *slog.Logger
}

// Stats are a spool's counters and its one gauge, Pending.
type Stats struct {
	Spooled        int64 // deletes taken (one an equal pending key covers counts too)
	Replayed       int64 // keys a server answered on replay
	ReplayFailed   int64 // keys a replay sent that got no answer (kept for the next)
	DroppedAtBound int64 // deletes dropped because the file was full
	CorruptTailCut int64 // times Open cut a corrupt or truncated tail
	Pending        int64 // keys waiting for their server
}

// Spool is a file of pending deletes per server. See the package comment.
type Spool struct {
	path string
	log  *slog.Logger

	mu       sync.Mutex
	cfg      Config
	f        *os.File
	size     int64 // bytes in the file
	live     int64 // bytes the pending records would take, magic included
	dirty    bool  // appended since the last sync
	full     bool  // a drop was logged; reset once an append fits again
	closed   bool
	servers  map[string]*server
	stopSync chan struct{} // closes FsyncInterval's syncer; nil without one
	buf      []byte

	spooled, replayed, replayFailed, dropped, cut, pending atomic.Int64
}

// server is one server's pending keys.
type server struct {
	replay sync.Mutex // held through a replay: one socket replays at a time
	keys   [][]byte   // in order; the first sending are being replayed
	queued map[string]int
	// sending is how many keys at the head a replay has taken; they are
	// not in queued, so a delete of one of them appended meanwhile is
	// spooled again rather than taken as covered.
	sending int
}

// Open opens the spool at cfg.Path, creating it if missing, and reads its
// pending records. A corrupt or truncated tail is cut, logged and counted.
// A file that does not start with Magic is refused.
func Open(cfg Config) (*Spool, error) {
	if cfg.Path == "" {
		return nil, errors.New("spool: no path")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Spool{path: cfg.Path, log: cfg.Logger.With("spool", cfg.Path), servers: map[string]*server{}}
	s.setConfig(cfg)
	data, err := os.ReadFile(cfg.Path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if err := s.load(data); err != nil {
		return nil, err
	}
	if err := s.rewrite(); err != nil {
		return nil, err
	}
	s.startSync()
	return s, nil
}

// setConfig fills cfg's defaults and takes it. Caller holds mu or owns s.
func (s *Spool) setConfig(cfg Config) {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	s.cfg = cfg
}

// load applies the records of data, a file's bytes, cutting (counting,
// logging) a corrupt tail.
func (s *Spool) load(data []byte) error {
	if len(data) < len(Magic) {
		if !bytes.HasPrefix([]byte(Magic), data) {
			return fmt.Errorf("spool: %s is not a spool file", s.path)
		}
		if len(data) > 0 {
			s.cutAt(0, ErrShort)
		}
		return nil
	}
	if string(data[:len(Magic)]) != Magic {
		return fmt.Errorf("spool: %s is not a spool file", s.path)
	}
	off := len(Magic)
	for off < len(data) {
		r, n, err := ReadRecord(data[off:])
		if err != nil {
			s.cutAt(int64(off), err)
			return nil
		}
		s.apply(r)
		off += n
	}
	return nil
}

// cutAt counts and logs a tail cut at off.
func (s *Spool) cutAt(off int64, err error) {
	s.cut.Add(1)
	s.log.Warn("spool tail cut", "file", s.path, "offset", off, "err", err)
}

// apply applies one record read from the file. Caller owns s.
func (s *Spool) apply(r Record) {
	switch r.Op {
	case OpDelete:
		s.enqueue(r.Server, bytes.Clone(r.Key))
	case OpDone:
		s.pop(r.Server, int(r.Count))
	}
}

// serverOf returns name's pending keys, made on first use. Caller holds mu.
func (s *Spool) serverOf(name string) *server {
	sv := s.servers[name]
	if sv == nil {
		sv = &server{queued: map[string]int{}}
		s.servers[name] = sv
	}
	return sv
}

// enqueue adds key to name's pending keys. Caller holds mu.
func (s *Spool) enqueue(name string, key []byte) {
	sv := s.serverOf(name)
	sv.keys = append(sv.keys, key)
	sv.queued[string(key)]++
	s.live += recordLen(name, key)
	s.pending.Add(1)
}

// pop drops name's first n pending keys (at most as many as it has).
// Caller holds mu.
func (s *Spool) pop(name string, n int) {
	sv := s.servers[name]
	if sv == nil {
		return
	}
	n = min(n, len(sv.keys))
	for i, k := range sv.keys[:n] {
		if i >= sv.sending {
			if sv.queued[string(k)]--; sv.queued[string(k)] <= 0 {
				delete(sv.queued, string(k))
			}
		}
		s.live -= recordLen(name, k)
	}
	clear(sv.keys[:n])
	sv.keys = sv.keys[n:]
	sv.sending = max(0, sv.sending-n)
	s.pending.Add(-int64(n))
	if len(sv.keys) == 0 && sv.sending == 0 {
		delete(s.servers, name)
	}
}

// recordLen is the size of a delete record of key for name.
func recordLen(name string, key []byte) int64 {
	return int64(headerLen + 2 + len(name) + len(key))
}

// Append spools a delete of key for server, unless an equal key is
// already pending for it. It reports false when the record was not
// taken: the file is at its bound, or the write failed (both counted as
// dropped). Under FsyncAlways it returns once the record is on disk.
func (s *Spool) Append(server string, key []byte) bool {
	if len(server) > 255 || 2+len(server)+len(key) > MaxBody || len(key) == 0 {
		s.dropped.Add(1)
		return false
	}
	s.spooled.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.dropped.Add(1)
		return false
	}
	if sv := s.servers[server]; sv != nil && sv.queued[string(key)] > 0 {
		return true // covered: a pending delete of the key is ahead of nothing that could undo it
	}
	n := recordLen(server, key)
	if s.size+n > s.cfg.MaxBytes && !s.makeRoom(n) {
		return false
	}
	s.buf = AppendRecord(s.buf[:0], Record{Op: OpDelete, Server: server, Key: key})
	if err := s.write(s.buf, s.cfg.Fsync == FsyncAlways); err != nil {
		s.dropped.Add(1)
		s.log.Error("spool write failed", "err", err)
		return false
	}
	s.enqueue(server, bytes.Clone(key))
	return true
}

// makeRoom compacts the file when that frees room for n more bytes, or
// counts a drop (logged once until a record fits again). Caller holds mu.
func (s *Spool) makeRoom(n int64) bool {
	if s.live+n <= s.cfg.MaxBytes/2+int64(len(Magic)) {
		if err := s.rewrite(); err == nil && s.size+n <= s.cfg.MaxBytes {
			s.full = false
			return true
		}
	}
	s.dropped.Add(1)
	if !s.full {
		s.full = true
		s.log.Warn("spool full: deletes dropped", "file", s.path, "max_bytes", s.cfg.MaxBytes, "pending", s.pending.Load())
	}
	return false
}

// write appends b to the file, syncing it when sync. Caller holds mu.
func (s *Spool) write(b []byte, sync bool) error {
	if _, err := s.f.Write(b); err != nil {
		// A short write leaves a partial record, cut at the next Open;
		// go back to the last whole one so later records stay readable.
		_ = s.f.Truncate(s.size)
		_, _ = s.f.Seek(s.size, io.SeekStart)
		return err
	}
	s.size += int64(len(b))
	if sync {
		return s.f.Sync()
	}
	s.dirty = true
	return nil
}

// rewrite writes the pending records alone to a new file and puts it in
// the old one's place (compaction). Caller holds mu or owns s.
func (s *Spool) rewrite() error {
	b := append([]byte(nil), Magic...)
	for name, sv := range s.servers {
		for _, k := range sv.keys {
			b = AppendRecord(b, Record{Op: OpDelete, Server: name, Key: k})
		}
	}
	tmp := s.path + ".tmp"
	if err := writeSynced(tmp, b); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("spool: %w", err)
	}
	syncDir(filepath.Dir(s.path))
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if s.f != nil {
		s.f.Close()
	}
	s.f, s.size, s.dirty = f, int64(len(b)), false
	return nil
}

// writeSynced writes b to a new file at path and syncs it.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir syncs a directory, so that a rename in it is durable.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Pending returns how many keys wait for server.
func (s *Spool) Pending(server string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sv := s.servers[server]; sv != nil {
		return len(sv.keys)
	}
	return 0
}

// Path returns the spool's file.
func (s *Spool) Path() string { return s.path }

// Stats returns the spool's counters.
func (s *Spool) Stats() Stats {
	return Stats{
		Spooled:        s.spooled.Load(),
		Replayed:       s.replayed.Load(),
		ReplayFailed:   s.replayFailed.Load(),
		DroppedAtBound: s.dropped.Load(),
		CorruptTailCut: s.cut.Load(),
		Pending:        s.pending.Load(),
	}
}

// Close syncs and closes the file; later Appends are dropped.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.stopSync != nil {
		close(s.stopSync)
		s.stopSync = nil
	}
	err := s.f.Sync()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}
