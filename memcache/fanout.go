package memcache

import (
	"bytes"

	"shardproxy/codec"
)

// Split implements codec.Dialect for retrieval requests (get, gets, gat,
// gats): one sub-request per distinct target in order of first appearance,
// carrying that target's keys in the client's order, duplicates kept. It
// returns nil for any other request or when targets does not match
// req.Keys. The sub-requests own fresh storage.
func (*Dialect) Split(req *codec.Request, targets []int) (subs []*codec.Request, subTargets []int) {
	if !isRetrieval(req.Cmd) || len(targets) != len(req.Keys) || len(targets) == 0 {
		return nil, nil
	}
	exptime := touchExptime(req)
	slot := make(map[int]int) // target -> index in subs
	var sizes []int
	for i, t := range targets {
		j, ok := slot[t]
		if !ok {
			j = len(subTargets)
			slot[t] = j
			subTargets = append(subTargets, t)
			sizes = append(sizes, len(req.Name)+len(exptime)+len(" \r\n"))
		}
		sizes[j] += len(req.Keys[i]) + 1
	}
	subs = make([]*codec.Request, len(subTargets))
	for j := range subs {
		b := make([]byte, 0, sizes[j])
		b = append(b, req.Name...)
		if len(exptime) > 0 {
			b = append(append(b, ' '), exptime...)
		}
		subs[j] = &codec.Request{Name: req.Name, Cmd: req.Cmd, Mode: req.Mode, Buf: b}
	}
	for i, t := range targets {
		s := subs[slot[t]]
		s.Buf = append(s.Buf, ' ')
		start := len(s.Buf)
		s.Buf = append(s.Buf, req.Keys[i]...)
		s.Keys = append(s.Keys, s.Buf[start:len(s.Buf):len(s.Buf)])
	}
	for _, s := range subs {
		s.Buf = append(s.Buf, "\r\n"...)
		s.Wire = s.Buf[:len(s.Buf):len(s.Buf)]
		s.Route = codec.RouteKey
		if len(s.Keys) > 1 {
			s.Route = codec.RouteMulti
		}
	}
	return subs, subTargets
}

// touchExptime returns the exptime token of a gat or gats request (the
// second token of its wire), or nil.
func touchExptime(req *codec.Request) []byte {
	if !isTouching(req.Cmd) {
		return nil
	}
	line := req.Wire
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	var tok []byte
	for range 2 {
		line = bytes.TrimLeft(line, " ")
		tok, line, _ = bytes.Cut(line, []byte(" "))
	}
	return tok
}

// Merge implements codec.Dialect.
//
// A retrieval request answers the VALUE blocks of all sub-replies in the
// client's key order and one END. A failed fragment fails the whole request
// (twemproxy's rule): a reply with Err gives "SERVER_ERROR <Err>", and a
// ReplyError (or ReplyFatal) gives that reply's error line.
//
// A RouteAll request (flush_all) answers "OK" when every backend did, else
// the first error.
//
// A noreply request shows nothing.
func (*Dialect) Merge(dst []byte, req *codec.Request, subs []*codec.Request, replies []codec.Reply) []byte {
	if req.Mode == codec.ModeNoreply {
		return dst
	}
	for _, r := range replies {
		if r.Err != nil {
			return appendLine(append(dst, "SERVER_ERROR "...), r.Err.Error())
		}
	}
	for _, r := range replies {
		if r.Kind == codec.ReplyError || r.Kind == codec.ReplyFailure || r.Kind == codec.ReplyFatal {
			return appendLastLine(dst, r.Raw)
		}
	}
	if !isRetrieval(req.Cmd) {
		return append(dst, "OK\r\n"...)
	}
	return mergeValues(dst, req, subs, replies)
}

// mergeValues walks each sub-reply with a cursor. A sub-request's keys are
// in the client's order, and its reply holds the blocks of the hits in that
// order; so for each client key, the sub-request whose next key it is owns
// it, and that sub-reply's next block is the key's value exactly when the
// block's key matches.
func mergeValues(dst []byte, req *codec.Request, subs []*codec.Request, replies []codec.Reply) []byte {
	n := min(len(subs), len(replies))
	var cursorsBuf [16][2]int
	cursors := cursorsBuf[:0]
	if n > len(cursorsBuf) {
		cursors = make([][2]int, 0, n)
	}
	cursors = cursors[:n] // [0]: next key of subs[j], [1]: offset in replies[j].Raw
	for _, key := range req.Keys {
		for j := range n {
			c := &cursors[j]
			sk := subs[j].Keys
			if c[0] >= len(sk) || !bytes.Equal(sk[c[0]], key) {
				continue
			}
			c[0]++
			raw := replies[j].Raw
			if k, end, err := nextValue(raw, c[1]); err == nil && bytes.Equal(k, key) {
				dst = append(dst, raw[c[1]:end]...)
				c[1] = end
			}
			break
		}
	}
	return append(dst, "END\r\n"...)
}

// appendLastLine appends the last line of raw, the error line that ends
// an errored reply, with "\r\n".
func appendLastLine(dst, raw []byte) []byte {
	line := bytes.TrimSuffix(raw, []byte("\r\n"))
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if len(line) == 0 {
		return append(dst, "SERVER_ERROR empty reply from backend\r\n"...)
	}
	return append(append(dst, line...), "\r\n"...)
}
