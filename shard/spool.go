package shard

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/kind"
	"shardproxy/memcache"
	"shardproxy/route"
	"shardproxy/sharding"
	"shardproxy/spool"
)

// A native memcache pool with delete_spool never loses a delete (docs/
// deletes.md). What it spools, per server (by its name in the ring, so
// that a server given a new address keeps its records):
//   - a delete (delete, md) or a write that replaces or changes a value
//     (set, add, replace, append, prepend, cas, incr, decr, ms, ma) whose
//     call to its server failed: refused, marked bad, timed out, or the
//     socket lost before the reply; a delete is idempotent, so a call
//     that may have reached the server is spooled too, and a write
//     becomes a delete of its key;
//   - one such request routed to another server than its key's own: its
//     own server is ejected (auto_eject_hosts, or a fleet's ring) or bad
//     under eject_policy failover, and must not serve the old value when
//     it comes back.
// The client's reply is what it would be without the spool.
//
// Replay: the pool's backends carry the spool as their backend.Replayer,
// so a new socket of a server sends that server's pending keys (as
// "delete", or "md <base64> b" for a key text cannot carry) once its
// handshake passed and before any call; DELETED and NOT_FOUND (HD, NF)
// are done, anything else keeps the key and drops the socket.
//
// The spool is one per file in the process (spools): a reload that keeps
// the pool's path hands it on, its bound and fsync policy applied; the
// backends a reload keeps keep it as their Replayer. Two pools may not
// name one file.

// deleteSpool is a pool's spool, shared by its routers across reloads.
type deleteSpool struct {
	kind.Holds
	*spool.Spool
	pool, path string
	log        *slog.Logger
}

var (
	_ backend.Replayer   = (*deleteSpool)(nil)
	_ kind.CounterSource = (*deleteSpool)(nil)
)

// spools are the spools open in the process, by absolute path. Its lock
// also orders a hold against the last drop.
var spools = struct {
	sync.Mutex
	open map[string]*deleteSpool
}{open: map[string]*deleteSpool{}}

// takeSpool returns the spool of k's pool: the one open at its path
// (another hold), or the file opened.
func takeSpool(k *kind.Env) (*deleteSpool, error) {
	ds := k.Pool.DeleteSpool
	path, err := filepath.Abs(k.Source.Path(ds.Path))
	if err != nil {
		return nil, fmt.Errorf("delete_spool: %w", err)
	}
	cfg := spool.Config{Path: path, MaxBytes: ds.MaxBytes, Interval: ds.FsyncInterval, Logger: k.Log}
	switch ds.Fsync {
	case config.FsyncInterval:
		cfg.Fsync = spool.FsyncInterval
	case config.FsyncNever:
		cfg.Fsync = spool.FsyncNever
	}
	spools.Lock()
	defer spools.Unlock()
	if s := spools.open[path]; s != nil {
		if s.pool != k.Pool.Name {
			return nil, fmt.Errorf("delete_spool: %s is pool %s's spool", path, s.pool)
		}
		s.Hold()
		s.Reconfigure(cfg)
		return s, nil
	}
	sp, err := spool.Open(cfg)
	if err != nil {
		return nil, fmt.Errorf("delete_spool: %w", err)
	}
	s := &deleteSpool{Spool: sp, pool: k.Pool.Name, path: path, log: k.Log}
	s.Start(k.Counters, s)
	spools.open[path] = s
	if n := sp.Stats().Pending; n > 0 {
		k.Log.Info("delete spool has deletes to replay", "file", path, "pending", n)
	}
	return s, nil
}

// release gives back a router's hold; the last closes the file.
func (s *deleteSpool) release() {
	spools.Lock()
	defer spools.Unlock()
	s.Drop(s, func() {
		delete(spools.open, s.path)
		if err := s.Spool.Close(); err != nil {
			s.log.Error("delete spool close failed", "file", s.path, "err", err)
		}
	})
}

// Replay implements backend.Replayer: server's pending keys, sent as
// deletes on its new socket.
func (s *deleteSpool) Replay(server string, send func([]*codec.Request) ([]codec.ReplyKind, error)) error {
	return s.Spool.Replay(server, func(keys [][]byte) (int, error) {
		reqs := make([]*codec.Request, len(keys))
		for i, k := range keys {
			reqs[i] = deleteRequest(k)
		}
		kinds, err := send(reqs)
		n := 0
		for _, kd := range kinds {
			if kd != codec.ReplyOK && kd != codec.ReplyMiss {
				break
			}
			n++
		}
		if err == nil && n < len(keys) {
			err = fmt.Errorf("shard: replayed delete refused by %s", server)
		}
		return n, err
	})
}

// deleteRequest is the delete of key a replay sends: text "delete", or a
// meta delete of the key in base64 when text cannot carry it.
func deleteRequest(key []byte) *codec.Request {
	var wire []byte
	name, cmd := "delete", memcache.CmdDelete
	if textKey(key) {
		wire = append(append([]byte("delete "), key...), "\r\n"...)
	} else {
		name, cmd = "md", memcache.CmdMetaDelete
		wire = append([]byte("md "), base64.StdEncoding.EncodeToString(key)...)
		wire = append(wire, " b\r\n"...)
	}
	return &codec.Request{Name: name, Cmd: cmd, Route: codec.RouteKey,
		Keys: [][]byte{key}, Wire: wire, Buf: wire}
}

// textKey reports whether key may stand in a text command: at most 250
// bytes, none a space or a control character.
func textKey(key []byte) bool {
	if len(key) > 250 {
		return false
	}
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// Counters implements kind.CounterSource.
func (s *deleteSpool) Counters() []route.Stat {
	st := s.Spool.Stats()
	return []route.Stat{
		{Name: "delete_spool_spooled", Help: "Deletes and writes the spool took for a server they could not reach (or that was out of the ring).", Value: st.Spooled},
		{Name: "delete_spool_replayed", Help: "Spooled deletes a server answered before serving again.", Value: st.Replayed},
		{Name: "delete_spool_replay_failed", Help: "Spooled deletes sent on a new socket and not answered (kept, the socket dropped).", Value: st.ReplayFailed},
		{Name: "delete_spool_dropped_at_bound", Help: "Deletes dropped because the spool's file was at max_bytes.", Value: st.DroppedAtBound},
		{Name: "delete_spool_corrupt_tail_cut", Help: "Times the spool's file was opened with a corrupt or truncated tail, which was cut.", Value: st.CorruptTailCut},
		{Name: "delete_spool_pending", Help: "Spooled deletes waiting for their server.", Kind: route.Gauge, Value: st.Pending},
	}
}

// startSpool opens k's pool's spool, when it has one, and the full ring
// that names a key's own server while the pool's distribution may eject
// it. A configuration check opens nothing.
func (r *router) startSpool(k *kind.Env) error {
	if k.Pool.DeleteSpool == nil || k.Check {
		return nil
	}
	s, err := takeSpool(k)
	if err != nil {
		return err
	}
	r.spool = s
	r.tapSpool = r.spooled
	if r.cfg.AutoEjectHosts && r.cfg.EjectPolicy == config.EjectRemap {
		cfg := r.shardCfg
		cfg.AutoEject = false
		if r.home, err = sharding.New(cfg); err != nil {
			r.spool.release()
			r.spool = nil
			return err
		}
	}
	return nil
}

// spoolable reports whether req's failure to reach its server leaves
// that server a value the client meant to remove or replace.
func spoolable(req *codec.Request) bool {
	switch req.Cmd {
	case memcache.CmdDelete, memcache.CmdMetaDelete, memcache.CmdSet, memcache.CmdAdd, memcache.CmdReplace,
		memcache.CmdAppend, memcache.CmdPrepend, memcache.CmdCAS, memcache.CmdIncr, memcache.CmdDecr,
		memcache.CmdMetaSet, memcache.CmdMetaArithmetic:
		return len(req.Keys) == 1
	}
	return false
}

// spoolRouted is routeKey's part for a pool with a spool: a delete or
// write routed to target, not its key's own server, is spooled for that
// server now; and the call's failure is spooled by its tap (spooled).
func (r *router) spoolRouted(x *route.Exchange, target int) {
	if !spoolable(&x.Req) {
		return
	}
	key := x.Req.Keys[0]
	home := target
	switch {
	case r.home != nil:
		if h, err := r.home.Pick(key); err == nil {
			home = h
		}
	case target >= len(r.backends()): // the failover pool's: the key's own server is bad
		if h, err := r.shard.Pick(key); err == nil {
			home = h
		}
	}
	if home != target {
		r.spool.Append(r.backends()[home].Name(), key)
	}
	x.TapArg = uint64(target)
	if x.Tap == nil {
		x.Tap = r.tapSpool
	}
}

// spooled is the tap of a delete or write of a pool with a spool: a call
// that failed is spooled for its server, unless it was the failover
// pool's.
func (r *router) spooled(x *route.Exchange, c *backend.Call) {
	if c.Reply.Err == nil {
		return
	}
	if i := int(x.TapArg); i < len(r.backends()) {
		r.spool.Append(r.backends()[i].Name(), c.Req.Keys[0])
	}
}
