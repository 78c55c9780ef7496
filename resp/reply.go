package resp

import (
	"bytes"

	"shardproxy/codec"
)

// Backend reply limits. A reply beyond them is a broken stream, not a big
// reply.
const (
	// MaxReplyLine is the longest simple string, error or length line in a
	// reply, without "\r\n" (a Lua error can be long).
	MaxReplyLine = 1 << 20
	// MaxReplyBulk is the longest bulk string a reply may announce: Redis's
	// proto-max-bulk-len cannot exceed it by default (512 MiB), doubled.
	MaxReplyBulk = 1 << 30
	// MaxReplyElements is the most elements one reply array may announce.
	MaxReplyElements = 1 << 32
)

// ParseReply implements codec.Dialect. It frames one reply of any RESP2
// or RESP3 type, aggregates nested to any depth, without recursion: it
// counts the elements still to read. The kind comes from the top level:
// an error (simple or blob) whose code is LOADING is ReplyFailure (the
// server is unhealthy), any other error ReplyError (-BUSY too: a server
// running a long script answers it until the script ends or SCRIPT KILL
// ends it, and is not to be ejected; and -OOM: a server at its maxmemory
// refuses the commands that may grow it and serves every other, so
// ejecting it would fail its reads too), a null bulk string, null array or RESP3 null
// ReplyMiss, anything else ReplyOK (a reply with an attribute before it
// too, whatever follows the attribute). req is not needed: RESP replies
// frame themselves, and a RESP3 socket's replies are framed by the same
// rules as a RESP2 socket's.
func (*Dialect) ParseReply(buf []byte, _ *codec.Request) (int, codec.ReplyKind, error) {
	return parseReply(buf, 0, 1, nil)
}

// ResumeReply implements codec.Dialect. An unfinished reply is resumed at
// the element it stopped in: st.Off is that element's offset, st.Left the
// elements still to frame (that one included; the flat count covers
// nested arrays), and st.Index how many bytes of the element's line are
// known to hold no "\n". A bulk string cut short is read again from its
// header line only: its data is skipped by length. A long simple string
// or error cut short (a line may be 1 MiB) is searched for its end from
// where the last call stopped, and read once more whole when it ends.
// A reply resumed past its first line is an array: ReplyOK.
func (*Dialect) ResumeReply(buf []byte, _ *codec.Request, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	pos, pending, scanned := 0, int64(1), 0
	if st.Left > 0 && uint(st.Off) <= uint(len(buf)) && st.Index >= 0 { // else the zero state, or none of buf's
		pos, pending, scanned = st.Off, st.Left, st.Index
	}
	*st = codec.ReplyState{}
	if scanned > 0 && lineCut(buf, pos, scanned) {
		*st = codec.ReplyState{Off: pos, Left: pending, Index: len(buf) - pos}
		return 0, 0, codec.ErrIncomplete
	}
	return parseReply(buf, pos, pending, st)
}

// parseReply frames the reply at the start of buf from the element at pos,
// with pending elements (that one included) left to frame. When the reply
// is cut short it records in st, unless st is nil (ParseReply), where to
// resume. It is the state machine FuzzReply drives: one line per element,
// checked by its type's family (frameBlob, frameAggregate, checkLine); the
// top element's kind is the reply's. The usual element, a whole bulk
// string, is read here (a complexity of 16 rather than 13): a call to
// frameBlob for it cost an array reply a tenth of its time.
func parseReply(buf []byte, pos int, pending int64, st *codec.ReplyState) (int, codec.ReplyKind, error) {
	kind := codec.ReplyOK
	for ; pending > 0; pending-- {
		if pos < len(buf) && !isReplyType(buf[pos]) {
			return 0, 0, replyErr(ErrReplyType, buf[pos:min(len(buf), pos+64)])
		}
		line, next, err := replyLine(buf, pos)
		if err != nil {
			if err == codec.ErrIncomplete && st != nil {
				// The whole rest of buf is the line's so far.
				*st = codec.ReplyState{Off: pos, Left: pending, Index: len(buf) - pos}
			}
			return 0, 0, err
		}
		var k codec.ReplyKind
		switch buf[pos] {
		case '$':
			size, ok := parseInt(line)
			if end, whole := wholeBulk(buf, next, size); ok && whole {
				next = end // the usual element, read here
				break
			}
			k, next, err = frameBlob(buf, pos, next, line)
		case '!', '=':
			k, next, err = frameBlob(buf, pos, next, line)
		case '*', '~', '%', '|', '>':
			var add int64
			k, add, err = frameAggregate(buf, pos, next, line)
			pending += add
		default:
			k, err = checkLine(buf, pos, next, line)
		}
		if err != nil {
			return 0, 0, err
		}
		if next > len(buf) { // a blob string's data cut short
			if st != nil {
				*st = codec.ReplyState{Off: pos, Left: pending}
			}
			return 0, 0, codec.IncompleteFrom(pos, next)
		}
		if pos == 0 {
			kind = k
		}
		pos = next
	}
	return pos, kind, nil
}

// wholeBulk returns the offset after a bulk string of size bytes whose
// data starts at buf[next], and whether it is all in buf, with "\r\n"
// after it, and of a size a reply may have. Small enough to inline: a
// bulk string is the usual element of an array reply.
func wholeBulk(buf []byte, next int, size int64) (end int, whole bool) {
	end = next + int(size) + 2
	return end, size >= 0 && size <= MaxReplyBulk && end <= len(buf) && buf[end-2] == '\r' && buf[end-1] == '\n'
}

// frameBlob checks a blob string (bulk "$", blob error "!", verbatim "=")
// whose length line ends at next, and returns its kind and the offset
// after its data: past len(buf) when the data is cut short.
func frameBlob(buf []byte, pos, next int, line []byte) (codec.ReplyKind, int, error) {
	size, ok := parseInt(line)
	switch {
	case ok && size == -1 && buf[pos] == '$':
		return codec.ReplyMiss, next, nil
	case !ok || size < 0 || size > MaxReplyBulk:
		return 0, 0, replyErr(ErrReplyLength, buf[pos:next])
	}
	end := next + int(size)
	if len(buf) < end+2 {
		return 0, end + 2, nil
	}
	if buf[end] != '\r' || buf[end+1] != '\n' {
		return 0, 0, replyErr(ErrReplyBulkEnding, buf[end:end+2])
	}
	switch {
	case buf[pos] == '=' && (size < 4 || buf[next+3] != ':'):
		return 0, 0, replyErr(ErrReplyVerbatim, buf[pos:min(end, next+64)])
	case buf[pos] == '!':
		return errorKind(buf[next:end]), end + 2, nil
	}
	return codec.ReplyOK, end + 2, nil
}

// frameAggregate checks an aggregate's count line (array "*", set "~",
// map "%", attribute "|", push ">") and returns its kind and how many
// elements it adds to those still to frame.
func frameAggregate(buf []byte, pos, next int, line []byte) (codec.ReplyKind, int64, error) {
	count, ok := parseInt(line)
	switch {
	case ok && count == -1 && buf[pos] == '*':
		return codec.ReplyMiss, 0, nil
	case !ok || count < 0 || count > MaxReplyElements:
		return 0, 0, replyErr(ErrReplyLength, buf[pos:next])
	}
	return codec.ReplyOK, elements(buf[pos], count), nil
}

// checkLine checks a reply that is one line (simple string "+", error
// "-", integer ":", null "_", double ",", boolean "#", big number "(")
// and returns its kind.
func checkLine(buf []byte, pos, next int, line []byte) (codec.ReplyKind, error) {
	switch buf[pos] {
	case '-':
		return errorKind(line), nil
	case ':':
		if _, ok := parseInt(line); !ok {
			return 0, replyErr(ErrReplyInteger, buf[pos:next])
		}
	case '_':
		if len(line) != 0 {
			return 0, replyErr(ErrReplyScalar, buf[pos:next])
		}
		return codec.ReplyMiss, nil
	case ',', '#', '(':
		if !validScalar(buf[pos], line) {
			return 0, replyErr(ErrReplyScalar, buf[pos:next])
		}
	}
	return codec.ReplyOK, nil
}

// isReplyType reports whether c starts a RESP2 or RESP3 reply.
func isReplyType(c byte) bool { return replyTypes[c] }

// replyTypes marks the type bytes of RESP2 (+ - : $ *) and RESP3: null
// "_", double ",", boolean "#", big number "(", blob error "!", verbatim
// string "=", map "%", set "~", attribute "|" and push ">". The streamed
// forms (a "?" length, ";" chunks, "." end) are not among them: Redis
// 7.0 never sends them, and a reply using them is a broken stream.
var replyTypes = [256]bool{
	'+': true, '-': true, ':': true, '$': true, '*': true,
	'_': true, ',': true, '#': true, '(': true, '!': true, '=': true,
	'%': true, '~': true, '|': true, '>': true,
}

// elements is how many elements an aggregate of type t and count entries
// adds to those still to frame: a map's pairs are two each, and an
// attribute (a map) is followed by the reply it annotates.
func elements(t byte, count int64) int64 {
	switch t {
	case '%':
		return 2 * count
	case '|':
		return 2*count + 1
	}
	return count
}

// validScalar reports whether line is a RESP3 double (","), boolean ("#")
// or big number ("(").
func validScalar(t byte, line []byte) bool {
	switch t {
	case '#':
		return len(line) == 1 && (line[0] == 't' || line[0] == 'f')
	case '(':
		return validBigNumber(line)
	}
	return validDouble(line)
}

// validBigNumber reports whether line is an optional minus and digits.
func validBigNumber(line []byte) bool {
	digits := line
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(digits) > 0
}

// validDouble reports whether line is inf, -inf, nan, or made of digits,
// signs, points and exponents.
func validDouble(line []byte) bool {
	switch string(line) {
	case "inf", "-inf", "nan":
		return true
	}
	for _, c := range line {
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			return false
		}
	}
	return len(line) > 0
}

// replyLine returns the line at buf[pos:] after its type byte, without
// "\r\n", and the offset after it.
func replyLine(buf []byte, pos int) (line []byte, next int, err error) {
	rest := buf[pos:]
	i := bytes.IndexByte(rest[:min(len(rest), MaxReplyLine+3)], '\n')
	if i < 0 {
		if len(rest) > MaxReplyLine+2 {
			return nil, 0, replyErr(ErrReplyLineTooLong, rest)
		}
		return nil, 0, codec.ErrIncomplete
	}
	if i < 2 || rest[i-1] != '\r' {
		return nil, 0, replyErr(ErrReplyLineEnding, rest[:i+1])
	}
	return rest[1 : i-1], pos + i + 1, nil
}

// lineCut reports whether the line at buf[pos:], whose first scanned
// bytes hold no '\n', is still cut short and within MaxReplyLine. Kept
// out of replyLine: a start offset there costs ParseReply a tenth of its
// time per array element.
func lineCut(buf []byte, pos, scanned int) bool {
	rest := buf[pos:]
	limit := min(len(rest), MaxReplyLine+3)
	return len(rest) <= MaxReplyLine+2 && bytes.IndexByte(rest[min(scanned, limit):limit], '\n') < 0
}

// errorKind classifies an error reply by its code, the first word.
func errorKind(msg []byte) codec.ReplyKind {
	code := msg
	if i := bytes.IndexByte(code, ' '); i >= 0 {
		code = code[:i]
	}
	switch string(code) {
	case "LOADING":
		return codec.ReplyFailure
	}
	return codec.ReplyError
}
