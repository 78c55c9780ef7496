package memcache

import (
	"bytes"

	"shardproxy/codec"
)

// memcached sends the reply to a text get as soon as it has it: a batch of
// one-key gets costs it, and the reader at the other end, one send and one
// read per get, where the batch's meta gets or one get naming every key
// cost one. A backend socket joins the one-key gets of a batch into one
// multi-get (codec.Joiner); unlike a rewrite to mg, the server still sees
// a get, with a get's meaning: a meta get would take the win flag of a
// stale item, which a text get never does.

var _ codec.Joiner = (*Dialect)(nil)

// JoinClass implements codec.Joiner: a one-key get and a one-key gets are
// each their own class; nothing else is joined.
func (*Dialect) JoinClass(req *codec.Request) int {
	if req.Mode != codec.ModeNormal || req.Route != codec.RouteKey || req.Close || !isOneKeyGet(req) {
		return 0
	}
	return req.Cmd
}

// AppendJoined implements codec.Joiner: "get <key> <key>...\r\n" (or gets).
func (*Dialect) AppendJoined(dst []byte, reqs []*codec.Request) []byte {
	dst = append(dst, cmdNames[reqs[0].Cmd]...)
	for _, req := range reqs {
		dst = append(dst, ' ')
		dst = append(dst, req.Keys[0]...)
	}
	return append(dst, "\r\n"...)
}

// ParseJoined implements codec.Joiner. A multi-get's reply holds a VALUE
// block per hit, in the order of the keys, then END. The part of a key
// other than the last is its block, if the reply's next block is that
// key's, which is then answered as a one-key get's hit (the block, then
// END); if the next block is a later key's, or END comes, the key missed
// and its part takes no bytes. An error line ends the whole reply: every
// key still unanswered gets it, and the last key's part takes it.
//
// The keys of one joined request differ (the socket never joins a key
// twice), so a block names the key it answers without doubt; a block that
// names none of the keys still unanswered is a desync, as for a multi-get.
func (*Dialect) ParseJoined(buf []byte, run []*codec.Request) (n, raw int, tail string, kind codec.ReplyKind, err error) {
	const end = "END\r\n"
	next, size, ok := 0, 0, false
	if _, next, size, ok = valueHeader(buf, 0, run[0].Keys, 0); !ok {
		var line []byte
		if line, next, err = readLine(buf, 0); err != nil {
			return 0, 0, "", 0, err
		}
		switch {
		case string(line) == "END":
			return 0, 0, end, codec.ReplyMiss, nil
		case isErrorLine(line):
			return 0, next, "", errorKind(line), nil
		case !hasWord(line, "VALUE"):
			return 0, 0, "", 0, replyErr(ErrUnexpectedReply, line)
		}
		var key []byte
		if key, size, err = parseValueLine(line); err != nil {
			return 0, 0, "", 0, err
		}
		if !bytes.Equal(key, run[0].Keys[0]) {
			for _, later := range run[1:] {
				if bytes.Equal(key, later.Keys[0]) {
					return 0, 0, end, codec.ReplyMiss, nil
				}
			}
			return 0, 0, "", 0, replyErr(ErrUnexpectedReply, line)
		}
	}
	if n, err = skipData(buf, 0, next, size, len(end)); err != nil {
		return 0, 0, "", 0, err
	}
	return n, n, end, codec.ReplyOK, nil
}
