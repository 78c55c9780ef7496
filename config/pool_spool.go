package config

import (
	"fmt"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Values of DeleteSpool.Fsync.
const (
	FsyncAlways   = "always"
	FsyncInterval = "interval"
	FsyncNever    = "never"
)

// The defaults and bounds of delete_spool.
const (
	// DefaultSpoolMaxBytes bounds a delete spool's file (max_bytes).
	DefaultSpoolMaxBytes = 64 << 20
	// MinSpoolMaxBytes and MaxSpoolMaxBytes bound max_bytes.
	MinSpoolMaxBytes = 4 << 10
	MaxSpoolMaxBytes = 1 << 40
	// DefaultSpoolFsync syncs every record before the client's reply.
	DefaultSpoolFsync = FsyncAlways
	// DefaultSpoolFsyncInterval is fsync interval's period
	// (fsync_interval, in milliseconds).
	DefaultSpoolFsyncInterval = time.Second
)

// DeleteSpool is a native memcache pool's spool of the deletes that could
// not reach their server (key delete_spool, a shardproxy extension, a
// mapping): they are kept in a file and sent to the server, in order,
// before it serves again (docs/deletes.md).
type DeleteSpool struct {
	// Path is the file (key path, required), relative to the
	// configuration's directory (Config.Path). Two pools may not share
	// one.
	Path string
	// MaxBytes bounds the file (key max_bytes, MinSpoolMaxBytes to
	// MaxSpoolMaxBytes, default DefaultSpoolMaxBytes); past it, new
	// deletes are dropped and counted.
	MaxBytes int64
	// Fsync is FsyncAlways (the default: a record is on disk before the
	// client's reply), FsyncInterval or FsyncNever (key fsync).
	Fsync string
	// FsyncInterval is fsync interval's period (key fsync_interval, in
	// milliseconds, 1 to 60000; default DefaultSpoolFsyncInterval); only
	// with fsync: interval.
	FsyncInterval time.Duration
	// Line is the line of the delete_spool key, for messages.
	Line int
}

// spoolKeys are the keys of a native memcache pool's delete spool. The
// other kinds refuse them with the near cache's (RefuseNearKeys).
var spoolKeys = map[string]poolKey{
	"delete_spool": poolKey{set: (*poolParser).setDeleteSpool, given: func(p *Pool) bool { return p.DeleteSpool != nil }}.
		encodedAs(deleteSpoolNode).onlyIf(func(p *Pool) bool { return p.DeleteSpool != nil }),
}

// deleteSpoolKeys are delete_spool's own keys, each read by its setter.
var deleteSpoolKeys = map[string]func(ds *DeleteSpool, v *yaml.Node) string{
	"path": func(ds *DeleteSpool, v *yaml.Node) string {
		if v.Value == "" {
			return "is empty; want a file"
		}
		ds.Path = v.Value
		return ""
	},
	"max_bytes": func(ds *DeleteSpool, v *yaml.Node) string {
		var n int
		msg := sub(v, MinSpoolMaxBytes, MaxSpoolMaxBytes, &n)
		ds.MaxBytes = int64(n)
		return msg
	},
	"fsync": func(ds *DeleteSpool, v *yaml.Node) string {
		switch v.Value {
		case FsyncAlways, FsyncInterval, FsyncNever:
			ds.Fsync = v.Value
			return ""
		}
		return fmt.Sprintf("unknown policy %q; want always, interval or never", v.Value)
	},
	"fsync_interval": func(ds *DeleteSpool, v *yaml.Node) string {
		var ms int
		msg := sub(v, 1, 60000, &ms)
		ds.FsyncInterval = time.Duration(ms) * time.Millisecond
		return msg
	},
}

// setDeleteSpool reads the delete_spool mapping. Each problem names the
// inner key ("delete_spool: fsync: ..."); one run reports all of them.
func (pp *poolParser) setDeleteSpool(key string, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		pp.fail(v.Line, key, "must be a mapping with path (and max_bytes, fsync, fsync_interval), not "+kindName(v))
		return
	}
	ds := &DeleteSpool{MaxBytes: DefaultSpoolMaxBytes, Fsync: DefaultSpoolFsync,
		FsyncInterval: DefaultSpoolFsyncInterval, Line: pp.keys[key]}
	seen, ok := readMapping(pp, key, v, "path, max_bytes, fsync or fsync_interval", deleteSpoolKeys, ds)
	switch {
	case !ok:
	case ds.Path == "":
		pp.fail(ds.Line, key, "path is missing: the spool's file")
	case seen["fsync_interval"] != 0 && ds.Fsync != FsyncInterval:
		pp.fail(seen["fsync_interval"], key, "fsync_interval: needs fsync: interval")
	default:
		pp.p.DeleteSpool = ds
	}
}

// deleteSpoolNode is the delete_spool mapping, its defaults left out.
func deleteSpoolNode(p *Pool) *yaml.Node {
	ds := p.DeleteSpool
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }
	add("path", str(ds.Path))
	if ds.MaxBytes != DefaultSpoolMaxBytes && ds.MaxBytes > 0 {
		add("max_bytes", num(strconv.FormatInt(ds.MaxBytes, 10)))
	}
	if ds.Fsync != DefaultSpoolFsync && ds.Fsync != "" {
		add("fsync", str(ds.Fsync))
	}
	if ds.Fsync == FsyncInterval && ds.FsyncInterval != DefaultSpoolFsyncInterval && ds.FsyncInterval > 0 {
		add("fsync_interval", num(millis(ds.FsyncInterval)))
	}
	return m
}
