package memcache

import (
	"bytes"

	"shardproxy/codec"
)

var _ codec.LookupCounter = (*Dialect)(nil)

// Lookups implements codec.LookupCounter as memcached counts cmd_get and
// cmd_set: each key of get, gets, gat, gats and mg is a lookup; set, add,
// replace, append, prepend, cas and ms are storage requests.
func (*Dialect) Lookups(req *codec.Request) (int, bool) {
	switch {
	case isRetrieval(req.Cmd) || req.Cmd == CmdMetaGet:
		return len(req.Keys), false
	case isStorage(req.Cmd) || req.Cmd == CmdMetaSet:
		return 0, true
	}
	return 0, false
}

// Hits implements codec.LookupCounter: the VALUE blocks of a text reply
// (walked by their lengths: a block whose data runs past the end of
// reply, the head of a big reply, counts; a one-key request's reply is
// a hit when it starts with one), or a meta reply's VA or HD line. A
// miss, an error, or nothing (a quiet mg's miss) counts none.
func (*Dialect) Hits(req *codec.Request, reply []byte) int {
	if req.Cmd == CmdMetaGet {
		if bytes.HasPrefix(reply, []byte("VA ")) || bytes.HasPrefix(reply, []byte("HD")) {
			return 1
		}
		return 0
	}
	if !bytes.HasPrefix(reply, []byte("VALUE ")) {
		return 0
	}
	if len(req.Keys) == 1 {
		// The usual get: one block at most, its line not worth reading.
		return 1
	}
	hits, off := 0, 0
	for off < len(reply) && bytes.HasPrefix(reply[off:], []byte("VALUE ")) {
		line, next, err := readLine(reply, off)
		if err != nil {
			return hits
		}
		_, size, err := parseValueLine(line)
		if err != nil {
			return hits
		}
		hits++
		off = next + size + 2
	}
	return hits
}
