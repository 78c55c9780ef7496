package memcache

import "shardproxy/codec"

// Trailers of the value blocks SpliceSpan recognises: a text get's block
// is followed by the end of the reply, a meta get's ends with its value.
const (
	textTrailer = "\r\nEND\r\n"
	metaTrailer = "\r\n"
)

// SpliceSpan implements codec.Splicer for the replies a one-key get or
// gets gets: "VALUE <key> <flags> <bytes> [<cas>]", the value and
// "\r\nEND\r\n" when it went as a text get, "VA <bytes> <flags>*", the
// value and "\r\n" when it went as a meta get (ModeRewrite). The header
// is checked as ParseReply checks it: the key must be the request's.
func (*Dialect) SpliceSpan(buf []byte, req *codec.Request) (data, size int, trailer string, ok bool) {
	switch {
	case req.Mode == codec.ModeRewrite && !invalidates(req):
		line, next, err := readLine(buf, 0)
		if err != nil || isErrorLine(line) {
			return 0, 0, "", false
		}
		v, hit, err := metaGetLine(line, req)
		if err != nil || !hit {
			return 0, 0, "", false
		}
		return next, v.size, metaTrailer, true
	case req.Mode == codec.ModeNormal && isOneKeyGet(req):
		_, next, size, ok := valueHeader(buf, 0, req.Keys, 0)
		if !ok {
			return 0, 0, "", false
		}
		return next, size, textTrailer, true
	}
	return 0, 0, "", false
}
