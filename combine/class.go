package combine

import (
	"bytes"
	"encoding/base64"

	"shardproxy/cluster"
	"shardproxy/codec"
	"shardproxy/memcache"
	"shardproxy/resp"
)

// class says what a request does to the keys it names, which decides
// where a route sends it.
type class uint8

const (
	// other is a request with no key a route tracks (version, stats,
	// INFO, SCAN ...): it goes to the pool that answers, as it is.
	other class = iota
	// read only reads its keys.
	read
	// get1 is a one-key get a warm phase may answer from the other pool
	// (memcache get, Redis GET).
	get1
	// write changes its keys; the other pool of a migration gets a
	// delete of them.
	write
	// set replaces its key's value whatever it held (memcache set, Redis
	// SET without a condition): the other pool may get the same request.
	set
	// flush empties the servers (flush_all, FLUSHALL, FLUSHDB): both pools
	// of a migration get it.
	flush
)

// classify returns what req does, for a pool of the dialect named
// redis or not.
func classify(req *codec.Request, redis bool) class {
	switch req.Route {
	case codec.RouteKey, codec.RouteMulti, codec.RouteSame, codec.RouteAll:
	default:
		return other
	}
	if redis {
		return classifyRedis(req)
	}
	return classifyMemcache(req)
}

func classifyMemcache(req *codec.Request) class {
	switch req.Cmd {
	case memcache.CmdGet:
		if req.Route == codec.RouteKey && len(req.Keys) == 1 && req.Mode == codec.ModeNormal {
			return get1
		}
		return read
	case memcache.CmdGets:
		return read
	case memcache.CmdSet:
		if req.Mode == codec.ModeNormal {
			return set
		}
		return write
	case memcache.CmdGat, memcache.CmdGats, memcache.CmdAdd, memcache.CmdReplace, memcache.CmdAppend,
		memcache.CmdPrepend, memcache.CmdCAS, memcache.CmdIncr, memcache.CmdDecr, memcache.CmdTouch,
		memcache.CmdDelete, memcache.CmdMetaSet, memcache.CmdMetaDelete, memcache.CmdMetaArithmetic:
		return write
	case memcache.CmdMetaGet:
		if memcache.MetaGetWrites(req.Wire) {
			return write
		}
		return read
	case memcache.CmdFlushAll:
		return flush
	}
	return other
}

func classifyRedis(req *codec.Request) class {
	switch req.Name {
	case "get":
		if len(req.Keys) == 1 {
			return get1
		}
	case "set":
		if plainSet(req.Wire) {
			return set
		}
		return write
	case "flushall", "flushdb":
		return flush
	}
	if len(req.Keys) == 0 {
		return other
	}
	if cluster.ReadOnly(req.Name) {
		return read
	}
	return write
}

// plainSet reports whether wire, a RESP SET, is SET key value with at
// most an EX or PX: one that stores whatever the key held, and leaves the
// same key on any server it is sent to.
func plainSet(wire []byte) bool {
	n := bytes.Count(wire, []byte("\r\n$"))
	switch n {
	case 3:
		return true
	case 5:
		w := bytes.ToUpper(wire)
		return bytes.Contains(w, []byte("\r\nEX\r\n")) || bytes.Contains(w, []byte("\r\nPX\r\n"))
	}
	return false
}

// appendDelete appends the request that deletes keys: memcache "delete
// <key>" (one key; "md <base64> b" when the key is no text key), Redis
// DEL with every key.
func appendDelete(dst []byte, keys [][]byte, redis bool) []byte {
	if redis {
		return append(dst, resp.EncodeCommand("DEL", keys)...)
	}
	k := keys[0]
	if memcache.TextKey(k) {
		dst = append(dst, "delete "...)
		dst = append(dst, k...)
		return append(dst, "\r\n"...)
	}
	dst = append(dst, "md "...)
	dst = base64.StdEncoding.AppendEncode(dst, k)
	return append(dst, " b\r\n"...)
}
