package memcache

import (
	"bytes"
	"errors"
	"slices"

	"shardproxy/codec"
)

// Backend reply limits. A reply beyond them is a broken stream, not a big
// reply: memcached's item_size_max cannot exceed 1 GiB and its reply lines
// are a few hundred bytes.
const (
	// MaxReplyLine is the longest reply line (without "\r\n") in bytes.
	MaxReplyLine = 8 << 10
	// MaxReplyValue is the largest value a VALUE or VA block may announce.
	MaxReplyValue = 1 << 30
)

// ParseReply implements codec.Dialect. It frames exactly one reply to req
// (for a quiet meta request sent followed by "mn": the optional reply and
// the "MN" line after it). "ERROR", "CLIENT_ERROR ..." and "SERVER_ERROR ..." end any reply as
// ReplyError.
func (*Dialect) ParseReply(buf []byte, req *codec.Request) (int, codec.ReplyKind, error) {
	switch {
	case req.Mode == codec.ModeRewrite && !invalidates(req):
		return parseMetaGet(buf, req)
	case isRetrieval(req.Cmd):
		return parseRetrieval(buf, req.Keys, 0, 0, nil)
	case isMeta(req.Cmd) && req.Mode == codec.ModeQuiet && req.Arg == 0:
		return parseQuiet(buf, req.Cmd) // sent followed by "mn"
	case isMeta(req.Cmd):
		return parseMetaReply(buf, 0, req.Cmd)
	}
	return parseLineReply(buf, req.Cmd)
}

// ResumeReply implements codec.Dialect. The reply to a retrieval (get,
// gets, gat, gats), a VALUE block per hit, is resumed at the block it
// stopped in: st.Off is that block's offset and st.Index the request's
// next key to match; the block's line is read again, its data skipped by
// length. Every other reply is at most one line and one value (a meta
// reply, a get sent as mg, a quiet reply and its "MN"): it is framed from
// its start, which reads its lines again, no more than MaxReplyLine bytes
// each, and skips the value by length.
func (d *Dialect) ResumeReply(buf []byte, req *codec.Request, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	off, k := st.Off, st.Index
	*st = codec.ReplyState{}
	if req.Mode == codec.ModeRewrite || !isRetrieval(req.Cmd) {
		return d.ParseReply(buf, req)
	}
	if uint(off) > uint(len(buf)) || uint(k) > uint(len(req.Keys)) { // none of this reply's: start over
		off, k = 0, 0
	}
	return parseRetrieval(buf, req.Keys, off, k, st)
}

// readLine returns the reply line at buf[off:] without its "\r\n" and the
// offset after it.
func readLine(buf []byte, off int) (line []byte, next int, err error) {
	rest := buf[off:]
	i := bytes.IndexByte(rest[:min(len(rest), MaxReplyLine+2)], '\n')
	if i < 0 {
		if len(rest) > MaxReplyLine+1 {
			return nil, 0, replyErr(ErrReplyLineTooLong, rest)
		}
		return nil, 0, codec.ErrIncomplete
	}
	if i == 0 || rest[i-1] != '\r' {
		return nil, 0, replyErr(ErrReplyLineEnding, rest[:i])
	}
	if i-1 > MaxReplyLine {
		return nil, 0, replyErr(ErrReplyLineTooLong, rest)
	}
	return rest[:i-1], off + i + 1, nil
}

// errorKind classifies an error line: a bare "ERROR" means memcached did not
// understand a command the proxy sent it, so the stream is suspect
// (ReplyFatal); CLIENT_ERROR and SERVER_ERROR answer one request.
func errorKind(line []byte) codec.ReplyKind {
	if hasWord(line, "ERROR") {
		return codec.ReplyFatal
	}
	return codec.ReplyError
}

// BreaksStream reports whether raw, a reply, is ERROR or CLIENT_ERROR:
// a reply after which memcached's proxy no longer trusts the backend's
// socket (backend.Config.BreaksStream).
func BreaksStream(raw []byte) bool {
	line, _, _ := bytes.Cut(raw, []byte("\r\n"))
	return hasWord(line, "ERROR") || hasWord(line, "CLIENT_ERROR")
}

// isErrorLine reports whether line is one of memcached's error replies.
func isErrorLine(line []byte) bool {
	return hasWord(line, "ERROR") || hasWord(line, "CLIENT_ERROR") || hasWord(line, "SERVER_ERROR")
}

// hasWord reports whether line is word or starts with word and a space.
func hasWord(line []byte, word string) bool {
	return len(line) >= len(word) && string(line[:len(word)]) == word &&
		(len(line) == len(word) || line[len(word)] == ' ')
}

// parseLineReply frames the one-line reply of a storage, delete, touch,
// incr/decr, flush_all, verbosity, version or mn request.
func parseLineReply(buf []byte, cmd int) (int, codec.ReplyKind, error) {
	line, n, err := readLine(buf, 0)
	if err != nil {
		return 0, 0, err
	}
	if isErrorLine(line) {
		return n, errorKind(line), nil
	}
	ok, known := lineAnswers(cmd, line)
	switch {
	case !known:
		return 0, 0, ErrNoReply
	case ok:
		return n, codec.ReplyOK, nil
	case string(line) == "NOT_FOUND" && canMiss(cmd):
		return n, codec.ReplyMiss, nil
	}
	return 0, 0, replyErr(ErrUnexpectedReply, line)
}

// lineAnswers reports whether line is a success reply to cmd; known is
// false for a command whose reply is not one line.
func lineAnswers(cmd int, line []byte) (ok, known bool) {
	switch cmd {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCAS:
		l := string(line)
		return l == "STORED" || l == "NOT_STORED" || l == "EXISTS", true
	case CmdDelete:
		return string(line) == "DELETED", true
	case CmdTouch:
		return string(line) == "TOUCHED", true
	case CmdIncr, CmdDecr:
		_, ok = parseDecimal(line, 1<<64-1)
		return ok, true
	case CmdFlushAll, CmdVerbosity:
		return string(line) == "OK", true
	case CmdVersion:
		return hasWord(line, "VERSION") && len(line) > len("VERSION "), true
	case CmdMetaNoop:
		return string(line) == "MN", true
	}
	return false, false
}

// canMiss reports whether cmd answers NOT_FOUND for a key it did not
// find: a miss, no error.
func canMiss(cmd int) bool {
	switch cmd {
	case CmdSet, CmdAdd, CmdReplace, CmdAppend, CmdPrepend, CmdCAS,
		CmdDelete, CmdTouch, CmdIncr, CmdDecr:
		return true
	}
	return false
}

// parseRetrieval frames VALUE blocks up to END, from the block at off
// whose key is keys[k] or a later one. When the reply is cut short it
// records in st, unless st is nil (ParseReply), where to resume.
//
// The VALUE keys must be the request's keys (when it has them), in order,
// misses left out: a reply meant for another request (after a stray reply
// shifted the stream) is a desync, never a hit for the wrong key.
func parseRetrieval(buf []byte, keys [][]byte, off, k int, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	for {
		if len(keys) > 0 {
			// The usual block: its line read in one pass.
			if kk, next, size, ok := valueHeader(buf, off, keys, k); ok {
				end, err := skipData(buf, off, next, size, len("END\r\n"))
				if err != nil {
					return 0, 0, stopAt(st, off, k, err)
				}
				off, k = end, kk+1
				continue
			}
		}
		line, next, err := readLine(buf, off)
		if err != nil {
			return 0, 0, stopAt(st, off, k, err)
		}
		switch {
		case string(line) == "END":
			if off == 0 { // no VALUE block before it
				return next, codec.ReplyMiss, nil
			}
			return next, codec.ReplyOK, nil
		case isErrorLine(line):
			return next, errorKind(line), nil
		case !hasWord(line, "VALUE"):
			return 0, 0, replyErr(ErrUnexpectedReply, line)
		}
		key, size, err := parseValueLine(line)
		if err != nil {
			return 0, 0, err
		}
		kk, err := nextKey(keys, k, key, line)
		if err != nil {
			return 0, 0, err
		}
		end, err := skipData(buf, off, next, size, len("END\r\n"))
		if err != nil {
			return 0, 0, stopAt(st, off, k, err)
		}
		off, k = end, kk
	}
}

// nextKey finds key, a VALUE block's (line is its VALUE line), among
// keys[k:] and returns the index after it, where the next block's key is
// looked for. Without keys (a request the parser made always has them)
// any key will do.
func nextKey(keys [][]byte, k int, key, line []byte) (int, error) {
	if len(keys) == 0 {
		return k, nil
	}
	if k = keyIndex(keys, k, key); k == len(keys) {
		return 0, replyErr(ErrUnexpectedReply, line)
	}
	return k + 1, nil
}

// keyIndex returns the index of the first of keys[k:] that is key, or
// len(keys) when none is.
func keyIndex(keys [][]byte, k int, key []byte) int {
	for k < len(keys) && string(keys[k]) != string(key) {
		k++
	}
	return k
}

// stopAt returns err, and when it says the reply is unfinished records in
// st that framing resumes at the block at off, matching keys from index k.
func stopAt(st *codec.ReplyState, off, k int, err error) error {
	if st != nil && errors.Is(err, codec.ErrIncomplete) {
		st.Off, st.Index = off, k
	}
	return err
}

// valueHeader reads the usual VALUE line at buf[off:] in one pass: "VALUE ",
// a key that is one of keys[k:] (the first match is the one), flags and an
// optional cas of at most 19 digits, a length of at most 10 digits and no
// more than MaxReplyValue, single spaces, "\r\n". It returns the key's index,
// the offset after the line and the length. Any other line, and one cut
// short, is not ok: the general path (readLine, parseValueLine) then gives
// the same answer or the error. What valueHeader accepts it would accept
// alike (FuzzValueHeader).
//
// keys are tokens of a request line, as every retrieval request's are (the
// parser's, and Split's and the Lua routes' copies of them): none holds a
// space or a newline. So when the line holds the expected key followed by a
// space, that is where the scan would end, and valueHeader takes the key
// without scanning: a third of its time on a 100-key multi-get.
func valueHeader(buf []byte, off int, keys [][]byte, k int) (kk, next, size int, ok bool) {
	line := buf[off:min(len(buf), off+MaxReplyLine+2)]
	if len(line) < len("VALUE ") || string(line[:len("VALUE ")]) != "VALUE " {
		return 0, 0, 0, false
	}
	kk, i := k, len("VALUE ")
	if k < len(keys) && hasKeyAt(line, i, keys[k]) {
		// The usual block: the next key's, a hit. Comparing it whole
		// finds the key's end without scanning for it.
		i += len(keys[k])
	} else if kk, i, ok = scanKey(line, keys, k); !ok {
		return 0, 0, 0, false
	}
	if i, ok = digitField(line, i+1, 19); !ok || line[i] != ' ' { // the flags
		return 0, 0, 0, false
	}
	if i, size, ok = lengthField(line, i+1); !ok {
		return 0, 0, 0, false
	}
	if line[i] == ' ' { // the cas
		if i, ok = digitField(line, i+1, 19); !ok {
			return 0, 0, 0, false
		}
	}
	// line holds at most MaxReplyLine+2 bytes: a line that ends here is
	// no longer than MaxReplyLine.
	if i+1 >= len(line) || line[i] != '\r' || line[i+1] != '\n' {
		return 0, 0, 0, false
	}
	return kk, off + i + 2, size, true
}

// scanKey finds the key of a VALUE line, which starts after "VALUE ",
// when it is not keys[k]: it scans for the key's end, then looks for it
// among keys[k:]. It returns the key's index and the offset after it.
func scanKey(line []byte, keys [][]byte, k int) (kk, end int, ok bool) {
	i := len("VALUE ")
	for i < len(line) && line[i] != ' ' {
		if line[i] == '\n' { // the line ends inside the key
			return 0, 0, false
		}
		i++
	}
	if i == len("VALUE ") || i == len(line) {
		return 0, 0, false
	}
	key := line[len("VALUE "):i]
	if kk = keyIndex(keys, k, key); kk == len(keys) {
		return 0, 0, false
	}
	return kk, i, true
}

// digitField reads a VALUE line's number at line[i:], 1 to most digits,
// and returns the offset after it, where a byte must follow.
func digitField(line []byte, i, most int) (end int, ok bool) {
	end = skipDigits(line, i)
	return end, end > i && end-i <= most && end < len(line)
}

// lengthField reads a VALUE line's length at line[i:], 1 to 10 digits and
// no more than MaxReplyValue, and returns the offset after it, where a
// byte must follow, and the length.
func lengthField(line []byte, i int) (end, size int, ok bool) {
	end = i
	for end < len(line) && line[end]-'0' <= 9 {
		size = size*10 + int(line[end]-'0')
		end++
	}
	return end, size, end > i && end-i <= 10 && size <= MaxReplyValue && end < len(line)
}

// skipDigits returns the offset of the first byte at or after line[i]
// that is no digit.
func skipDigits(line []byte, i int) int {
	for i < len(line) && line[i]-'0' <= 9 {
		i++
	}
	return i
}

// hasKeyAt reports whether line holds key, which is not empty, at i
// followed by a space.
func hasKeyAt(line []byte, i int, key []byte) bool {
	e := i + len(key)
	return len(key) > 0 && e < len(line) && line[e] == ' ' && string(line[i:e]) == string(key)
}

// parseValueLine reads "VALUE <key> <flags> <bytes> [<cas>]": tokens
// separated by single spaces. A multi-get reply has one per hit, so it
// scans the short numeric tokens in one pass rather than token by token.
func parseValueLine(line []byte) (key []byte, size int, err error) {
	rest, ok := bytes.CutPrefix(line, []byte("VALUE "))
	i := bytes.IndexByte(rest, ' ')
	if !ok || i <= 0 {
		return nil, 0, replyErr(ErrBadValueLine, line)
	}
	key, rest = rest[:i], rest[i+1:]
	var f [3][]byte // flags, bytes, cas
	n, start := 0, 0
	for j := 0; j <= len(rest); j++ {
		if j < len(rest) && rest[j] != ' ' {
			continue
		}
		if j == start || n == len(f) { // an empty token, or one too many
			return nil, 0, replyErr(ErrBadValueLine, line)
		}
		f[n], n, start = rest[start:j], n+1, j+1
	}
	if n < 2 {
		return nil, 0, replyErr(ErrBadValueLine, line)
	}
	_, okFlags := parseDecimal(f[0], 1<<64-1)
	okCAS := true
	if n == 3 {
		_, okCAS = parseDecimal(f[2], 1<<64-1)
	}
	if !okFlags || !okCAS {
		return nil, 0, replyErr(ErrBadValueLine, line)
	}
	size, err = parseSize(f[1], line)
	return key, size, err
}

// parseSize reads a value length no larger than MaxReplyValue.
func parseSize(tok, line []byte) (int, error) {
	v, ok := parseDecimal(tok, 1<<64-1)
	if !ok {
		return 0, replyErr(ErrBadValueLine, line)
	}
	if v > MaxReplyValue {
		return 0, replyErr(ErrValueLength, line)
	}
	return int(v), nil
}

// skipData checks that size bytes of data and "\r\n" follow at off, in
// the block (value line and data) that starts at block, and returns the
// offset after them. trail is how many bytes the reply has at least after
// them. A block cut short announces the reply's length up to its end only
// when the block alone is long (codec.IncompleteFrom).
func skipData(buf []byte, block, off, size, trail int) (int, error) {
	end := off + size + 2
	if len(buf) < end {
		return 0, codec.IncompleteFrom(block, end+trail)
	}
	if buf[end-2] != '\r' || buf[end-1] != '\n' {
		return 0, replyErr(ErrValueTerminator, buf[end-2:end])
	}
	return end, nil
}

// metaCode returns the two-letter status of a meta reply line ("HD", "VA"),
// or "" when the line does not start with one.
func metaCode(line []byte) string {
	if len(line) < 2 || (len(line) > 2 && line[2] != ' ') {
		return ""
	}
	switch string(line[:2]) {
	case "VA":
		return "VA"
	case "HD":
		return "HD"
	case "OK": // HD under -o meta_response_old
		return "OK"
	case "EN":
		return "EN"
	case "NF":
		return "NF"
	case "NS":
		return "NS"
	case "EX":
		return "EX"
	case "ME":
		return "ME"
	case "MN":
		return "MN"
	}
	return ""
}

// metaAllowed reports whether meta command cmd can answer status code.
func metaAllowed(cmd int, code string) bool {
	return uint(cmd) < numCmds && slices.Contains(metaStatuses[cmd], code)
}

// metaStatuses lists the statuses each meta command can answer ("OK" is
// "HD" under -o meta_response_old).
var metaStatuses = [numCmds][]string{
	CmdMetaGet:        {"VA", "HD", "OK", "EN"},
	CmdMetaSet:        {"HD", "OK", "NS", "EX", "NF"},
	CmdMetaDelete:     {"HD", "OK", "NF", "EX"},
	CmdMetaArithmetic: {"VA", "HD", "OK", "NF", "NS", "EX"},
	CmdMetaDebug:      {"ME", "EN"},
}

// parseMetaReply frames one meta reply at buf[off:] and returns the offset
// after it.
func parseMetaReply(buf []byte, off, cmd int) (int, codec.ReplyKind, error) {
	line, next, err := readLine(buf, off)
	if err != nil {
		return 0, 0, err
	}
	if isErrorLine(line) {
		return next, errorKind(line), nil
	}
	code := metaCode(line)
	if !metaAllowed(cmd, code) || (code == "ME" && len(line) < 4) {
		return 0, 0, replyErr(ErrUnexpectedReply, line)
	}
	switch code {
	case "VA":
		size, err := vaSize(line)
		if err != nil {
			return 0, 0, err
		}
		if next, err = skipData(buf, off, next, size, 0); err != nil {
			return 0, 0, err
		}
		return next, codec.ReplyOK, nil
	case "EN", "NF":
		return next, codec.ReplyMiss, nil
	}
	return next, codec.ReplyOK, nil
}

// vaSize reads the length of "VA <size> <flag>*".
func vaSize(line []byte) (int, error) {
	if len(line) < 4 || line[2] != ' ' {
		return 0, replyErr(ErrBadValueLine, line)
	}
	size := line[3:]
	if i := bytes.IndexByte(size, ' '); i >= 0 {
		size = size[:i]
	}
	return parseSize(size, line)
}

// parseQuiet frames the reply to a quiet meta request, which the parser
// sent followed by "mn": whatever memcached shows in quiet mode (nothing,
// one reply or an error), then "MN". With nothing shown the kind is what
// quiet mode hides: a miss for mg, success for the others.
func parseQuiet(buf []byte, cmd int) (int, codec.ReplyKind, error) {
	line, next, err := readLine(buf, 0)
	if err != nil {
		return 0, 0, err
	}
	if string(line) == "MN" {
		if cmd == CmdMetaGet {
			return next, codec.ReplyMiss, nil
		}
		return next, codec.ReplyOK, nil
	}
	off, kind, err := parseMetaReply(buf, 0, cmd)
	if err != nil {
		return 0, 0, err
	}
	line, next, err = readLine(buf, off)
	if err != nil {
		return 0, 0, err
	}
	if string(line) != "MN" {
		return 0, 0, replyErr(ErrUnexpectedReply, line)
	}
	return next, kind, nil
}
