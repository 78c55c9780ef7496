package memcache

import (
	"bytes"
	"slices"

	"shardproxy/codec"
)

// Split implements codec.Dialect for retrieval requests (get, gets, gat,
// gats): one sub-request per distinct target in order of first appearance,
// carrying that target's keys in the client's order, duplicates kept. It
// returns nil for any other request or when targets does not match
// req.Keys.
func (*Dialect) Split(req *codec.Request, targets []int, scratch *codec.SplitScratch) (subs []*codec.Request, subTargets, owners []int) {
	if !isRetrieval(req.Cmd) || len(targets) != len(req.Keys) || len(targets) == 0 {
		return nil, nil, nil
	}
	exptime := touchExptime(req)
	// Which sub-request each key goes to (its owner): a linear search over
	// the distinct targets seen so far (a handful, usually) beats a map.
	// The sizes let the sub-requests share one byte array and one key
	// array.
	owners = scratch.OwnerList(len(targets))
	var bytesBuf, keysBuf [16]int
	bytesOf, keysOf := bytesBuf[:0], keysBuf[:0] // per sub-request
	subTargets = scratch.TargetList()
	head := len(req.Name) + len(exptime) + len(" \r\n")
	last := -1
	for i, t := range targets {
		j := last
		if j < 0 || subTargets[j] != t {
			j = slices.Index(subTargets, t)
			if j < 0 {
				j = len(subTargets)
				subTargets = append(subTargets, t)
				bytesOf = append(bytesOf, head)
				keysOf = append(keysOf, 0)
			}
			last = j
		}
		owners = append(owners, j)
		bytesOf[j] += len(req.Keys[i]) + 1
		keysOf[j]++
	}
	total := 0
	for _, n := range bytesOf {
		total += n
	}
	scratch.Keep(subTargets)
	buf, keys, reqs, subs := scratch.Grow(len(subTargets), len(targets), total)
	keys = keys[:len(targets)]
	for j := range subs {
		s := &reqs[j]
		start := len(buf)
		buf = append(buf, req.Name...)
		if len(exptime) > 0 {
			buf = append(append(buf, ' '), exptime...)
		}
		// Each sub-request's bytes and keys are its own stretch of the
		// shared arrays, capped: an append to one cannot spill into
		// the next.
		s.Buf = buf[start : len(buf) : start+bytesOf[j]]
		s.Keys, keys = keys[:0:keysOf[j]], keys[keysOf[j]:]
		buf = buf[:start+bytesOf[j]]
		s.Name, s.Cmd, s.Mode = req.Name, req.Cmd, req.Mode
		subs[j] = s
	}
	for i, j := range owners {
		s := subs[j]
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
	return subs, subTargets, owners
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
func (*Dialect) Merge(dst []byte, req *codec.Request, subs []*codec.Request, owners []int, replies []codec.Reply) []byte {
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
	return mergeValues(dst, req, subs, owners, replies)
}

// errForeignOwners answers a multi-get whose owners are not its split's.
const errForeignOwners = "SERVER_ERROR proxy: multi-get replies do not match its keys\r\n"

// mergeValues walks each sub-reply with a cursor. A sub-request's keys are
// in the client's order, and its reply holds the blocks of the hits in that
// order; so for each client key, the next block of its owner's reply is the
// key's value exactly when the block's key matches. Owners that do not fit
// req and subs (not Split's) get a SERVER_ERROR, never a read out of
// bounds.
func mergeValues(dst []byte, req *codec.Request, subs []*codec.Request, owners []int, replies []codec.Reply) []byte {
	n := min(len(subs), len(replies))
	if len(owners) != len(req.Keys) {
		return append(dst, errForeignOwners...)
	}
	var offsBuf [16]int
	offs := offsBuf[:0]
	if n > len(offsBuf) {
		offs = make([]int, 0, n)
	}
	offs = offs[:n] // offset of the next block in replies[j].Raw
	start := len(dst)
	for i, key := range req.Keys {
		j := owners[i]
		if uint(j) >= uint(n) {
			return append(dst[:start], errForeignOwners...)
		}
		raw := replies[j].Raw
		if end, ok := valueAt(raw, offs[j], key); ok {
			dst = append(dst, raw[offs[j]:end]...)
			offs[j] = end
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

// valueAt returns the offset after the VALUE block for key at raw[off:],
// or false when the block there is not key's (a miss) or not a VALUE block.
// raw is a reply ParseReply framed, so its blocks are well formed; valueAt
// reads only what it needs of the line, and never reads out of bounds
// whatever raw holds.
func valueAt(raw []byte, off int, key []byte) (int, bool) {
	i := off + len("VALUE ") + len(key)
	if i >= len(raw) || raw[i] != ' ' || string(raw[off:off+len("VALUE ")]) != "VALUE " || !bytes.Equal(raw[off+len("VALUE "):i], key) {
		return 0, false
	}
	i++
	for i < len(raw) && raw[i] != ' ' { // the flags
		i++
	}
	i++
	size := 0
	for ; i < len(raw) && '0' <= raw[i] && raw[i] <= '9'; i++ {
		size = size*10 + int(raw[i]-'0')
		if size > len(raw) {
			return 0, false
		}
	}
	if i >= len(raw) {
		return 0, false
	}
	nl := bytes.IndexByte(raw[i:], '\n')
	if nl < 0 {
		return 0, false
	}
	end := i + nl + 1 + size + len("\r\n")
	if end > len(raw) {
		return 0, false
	}
	return end, true
}
