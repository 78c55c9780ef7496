package memcache

import (
	"bytes"

	"shardproxy/codec"
	"shardproxy/internal/mcbase64"
)

// A one-key get or gets may go to the backend as a meta get (codec.Options
// MetaGets). memcached 1.6 sends the reply to a text get as soon as it has
// it, one send per get even when the socket holds a batch of them, while it
// holds meta replies until the batch is read: on a socket that pipelines
// many clients' requests, a batch of gets then costs memcached one send
// instead of one each.
//
// The proxy asks for the key back (k) and checks it, so a reply that is
// not this request's (a shifted stream) is a desync, as a VALUE line with
// another key is for a text get.

// Wire suffixes of the meta get sent for a get and for a gets: key back,
// client flags, (cas,) value. memcached returns the flags in this order.
const (
	metaGetSuffix  = " k f v\r\n"
	metaGetsSuffix = " k f c v\r\n"
)

// metaGet builds req for "get <key>" or "gets <key>" (the key at s in the
// line) as "mg <key> k f [c ]v" in ModeRewrite.
func metaGet(l *line, req *codec.Request, s span) {
	buildMetaGet(req, l.cmd, l.buf[s.start:s.end])
}

// MetaGet rewrites req, a one-key text get or gets as a parser without
// MetaGets made it, into the meta get that option would have made, and
// reports whether it did. A router that forwards a request untouched and
// gives its reply to the client as it comes (a Lua pool's direct
// handlers: lua.Config.MetaRewrite) sends gets as mg this way while its
// route still sees the client's get.
func MetaGet(req *codec.Request) bool {
	if req.Mode != codec.ModeNormal || req.Route != codec.RouteKey || !isOneKeyGet(req) {
		return false
	}
	buildMetaGet(req, req.Cmd, req.Keys[0])
	return true
}

// buildMetaGet makes req "mg <key> k f [c ]v" in ModeRewrite, for a get
// (cmd CmdGet) or gets. key may lie in req.Buf after the command name, as
// a parsed get's does: the rewrite writes "mg " before the key's first
// byte and moves the key down (append copies as memmove does).
func buildMetaGet(req *codec.Request, cmd int, key []byte) {
	suffix := metaGetSuffix
	if cmd == CmdGets {
		suffix = metaGetsSuffix
	}
	size := len("mg ") + len(key) + len(suffix)
	b := req.Buf[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	b = append(b, "mg "...)
	b = append(b, key...)
	b = append(b, suffix...)
	req.Buf = b
	req.Wire = b[:len(b):len(b)]
	req.Name = cmdNames[cmd]
	req.Cmd = cmd
	req.Mode = codec.ModeRewrite
	req.Route = codec.RouteKey
	req.Keys = append(req.Keys[:0], b[3:3+len(key):3+len(key)])
}

// metaValue is what a VA or EN line of a meta get says.
type metaValue struct {
	size    int
	sizeTok []byte // size, as memcached wrote it
	flags   []byte // client flags, decimal
	cas     []byte // cas unique, decimal (gets only)
}

// parseMetaGet frames the reply to a rewritten get or gets: "VA <size>
// k<key> f<flags> [c<cas>]", the data and "\r\n" (a hit); "EN" with or
// without "k<key>" (a miss); or an error line.
func parseMetaGet(buf []byte, req *codec.Request) (int, codec.ReplyKind, error) {
	line, next, err := readLine(buf, 0)
	if err != nil {
		return 0, 0, err
	}
	if isErrorLine(line) {
		return next, errorKind(line), nil
	}
	v, hit, err := metaGetLine(line, req)
	if err != nil {
		return 0, 0, err
	}
	if !hit {
		return next, codec.ReplyMiss, nil
	}
	if next, err = skipData(buf, 0, next, v.size, 0); err != nil {
		return 0, 0, err
	}
	return next, codec.ReplyOK, nil
}

// metaGetLine reads the status line of a meta get's reply to req: a hit
// ("VA ...") with its length, flags and cas, or a miss ("EN"). Any other
// line, a key that is not req's, or a hit without the flags (or the cas
// of a gets) is ErrUnexpectedReply or ErrBadValueLine.
func metaGetLine(line []byte, req *codec.Request) (v metaValue, hit bool, err error) {
	var rest []byte
	switch {
	case string(line) == "EN":
		return v, false, nil
	case bytes.HasPrefix(line, []byte("EN ")):
		rest = line[len("EN "):]
	case bytes.HasPrefix(line, []byte("VA ")):
		hit = true
		rest = line[len("VA "):]
		tok := rest
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		v.sizeTok = tok
		if v.size, err = parseSize(tok, line); err != nil {
			return v, false, err
		}
	default:
		return v, false, replyErr(ErrUnexpectedReply, line)
	}
	key, b64, ok := metaGetFlags(rest, &v)
	if !ok {
		return v, false, replyErr(ErrBadValueLine, line)
	}
	keyOK := key != nil && isKey(key, b64, req)
	if key != nil && !keyOK {
		return v, false, replyErr(ErrUnexpectedReply, line)
	}
	if !hit {
		// Without k memcached before 1.6.10 says "EN" alone; a k it sends
		// must be the key.
		return v, false, nil
	}
	if _, ok := parseDecimal(v.flags, 1<<64-1); !ok || !keyOK {
		return v, false, replyErr(ErrBadValueLine, line)
	}
	if req.Cmd == CmdGets {
		if _, ok := parseDecimal(v.cas, 1<<64-1); !ok {
			return v, false, replyErr(ErrBadValueLine, line)
		}
	}
	return v, true, nil
}

// metaGetFlags reads the return flags of a meta get's reply line, rest
// after its status: f and c into v, and the key (k) and whether it is in
// base64 (b alone). An empty token (two spaces) is not ok.
func metaGetFlags(rest []byte, v *metaValue) (key []byte, b64, ok bool) {
	for len(rest) > 0 {
		tok := rest
		if i := bytes.IndexByte(rest, ' '); i >= 0 {
			tok, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(tok) == 0 {
			return nil, false, false
		}
		switch tok[0] {
		case 'k':
			key = tok[1:]
		case 'b':
			b64 = len(tok) == 1
		case 'f':
			v.flags = tok[1:]
		case 'c':
			v.cas = tok[1:]
		}
	}
	return key, b64, true
}

// isKey reports whether the k token of a reply to req names req's key.
// memcached returns the key of an item stored under a base64 key (ms with
// "b") in base64, and says so with a "b" token.
func isKey(tok []byte, b64 bool, req *codec.Request) bool {
	if len(req.Keys) != 1 {
		return false
	}
	if !b64 {
		return string(tok) == string(req.Keys[0])
	}
	var dst [DefaultMaxKey + 3]byte
	if len(tok)/4*3 > len(dst) {
		return false
	}
	n := mcbase64.Decode(dst[:], tok)
	return n > 0 && string(dst[:n]) == string(req.Keys[0])
}

// appendMetaGet appends what a text client sees of reply, the framed
// reply to a rewritten get or gets: "VALUE <key> <flags> <size>[ <cas>]",
// the data and "END" for a hit, "END" for a miss, an error line as it is.
func appendMetaGet(dst []byte, req *codec.Request, reply []byte) []byte {
	dst, data, tail := metaGetHead(dst, req, reply)
	return append(append(dst, data...), tail...)
}

// AppendReplyHead implements codec.BigReplier: a rewritten get's reply
// in three parts, the data in the middle.
func (*Dialect) AppendReplyHead(dst []byte, req *codec.Request, reply []byte, _ codec.ReplyKind) (head, data []byte, tail string) {
	if invalidates(req) {
		return dst, nil, replyTooLarge
	}
	return metaGetHead(dst, req, reply)
}

// metaGetHead appends appendMetaGet's text up to the data and returns the
// data (with its "\r\n") and what follows.
func metaGetHead(dst []byte, req *codec.Request, reply []byte) (head, data []byte, tail string) {
	eol := bytes.IndexByte(reply, '\n')
	if eol < 1 {
		return dst, reply, ""
	}
	v, hit, err := metaGetLine(reply[:eol-1], req)
	switch {
	case err != nil: // an error line: ParseReply lets no other through
		return dst, reply, ""
	case !hit:
		return dst, nil, "END\r\n"
	}
	dst = append(dst, "VALUE "...)
	dst = append(dst, req.Keys[0]...)
	dst = append(dst, ' ')
	dst = append(dst, v.flags...)
	dst = append(dst, ' ')
	dst = append(dst, v.sizeTok...)
	if req.Cmd == CmdGets {
		dst = append(dst, ' ')
		dst = append(dst, v.cas...)
	}
	dst = append(dst, "\r\n"...)
	return dst, reply[eol+1:], "END\r\n"
}

// MetaGetWrites reports whether the mg line at the start of wire has a
// flag that writes: N (create the item on a miss) or T (a new TTL).
// memcached reads a flag from its token's first byte.
func MetaGetWrites(wire []byte) bool {
	tok := 0 // tokens seen; flags start at the third
	for i := 0; i < len(wire) && wire[i] != '\r' && wire[i] != '\n'; i++ {
		if wire[i] == ' ' {
			continue
		}
		if tok >= 2 && (wire[i] == 'N' || wire[i] == 'T') {
			return true
		}
		tok++
		for i+1 < len(wire) && wire[i+1] != ' ' && wire[i+1] != '\r' && wire[i+1] != '\n' {
			i++
		}
	}
	return false
}
