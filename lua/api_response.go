package lua

import (
	"bytes"
	"strconv"
	"time"

	glua "github.com/yuin/gopher-lua"

	"shardproxy/codec"
)

// response is the Go side of a Lua response object (memcached's
// mcp.response): one backend's reply, or the failure that took its place.
type response struct {
	ud      glua.LUserData // the Lua object, made by responseValue
	raw     []byte
	kind    codec.ReplyKind
	err     error // no reply: the backend failed (timeout, markedbad, ...)
	errKind codec.ErrorKind
	hdr     header // what AppendReply needs of the answered request
	elapsed time.Duration
	be      *beRef
	redis   bool
	made    bool // made by the script (rctx:response_new): its bytes go to the client as they are
	ownRaw  bool // raw was copied for this response (flag_blank writes to it)

	parsed bool
	status int    // mcmcOK or mcmcErr
	code   int    // an MCMC_CODE_*; SERVER_ERROR after a failure
	vlen   int    // value length without "\r\n"
	hasVal bool   // the reply carries a value block
	line   []byte // r:line(); nil for none
}

// header is a codec.Request without its buffers: what a reply needs of
// the request it answers once that request is gone.
type header struct {
	name  string
	cmd   int
	arg   int
	mode  codec.Mode
	route codec.Route
}

func headerOf(r *codec.Request) header {
	return header{name: r.Name, cmd: r.Cmd, arg: r.Arg, mode: r.Mode, route: r.Route}
}

// request fills r with h.
func (h *header) request(r *codec.Request) {
	*r = codec.Request{Name: h.name, Cmd: h.cmd, Arg: h.arg, Mode: h.mode, Route: h.route}
}

// parse classifies the reply the way memcached's mcmc client does.
func (res *response) parse() {
	if res.parsed {
		return
	}
	res.parsed = true
	res.status = mcmcErr
	if res.err != nil {
		// memcached's proxy fails the request with MCMC_CODE_SERVER_ERROR
		res.code = codeServerError
		return
	}
	line := res.raw
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	if res.redis {
		res.parseRedis(line)
		return
	}
	if res.hdr.mode == codec.ModeQuiet && string(line) == "MN" {
		// quiet mode hid the reply: a miss for mg, success for the rest
		res.status, res.code = mcmcOK, codeOK
		if res.kind == codec.ReplyMiss {
			res.code = codeEnd
		}
		return
	}
	res.status, res.code = mcCode(line)
	res.parseLine(line)
}

// parseLine sets line() and the value's length as mcmc does: a meta reply
// (a two-letter code) has the text after its code and one space (after
// the size for VA), so flags blanked with spaces keep them; nil when
// nothing follows the code;
// VALUE has its key; every other reply (STORED, END, a number, an error)
// has none.
func (res *response) parseLine(line []byte) {
	word, rest, more := bytes.Cut(line, []byte(" "))
	switch {
	case string(word) == "VALUE":
		if f, ok := thirdField(rest); ok {
			res.line, _, _ = bytes.Cut(bytes.TrimLeft(rest, " "), []byte(" ")) // the key
			res.vlen, _ = strconv.Atoi(string(f))
			res.hasVal = true
		}
	case len(word) == 2 && (line[0] < '0' || line[0] > '9'):
		if string(word) == "VA" {
			size, flags, hasFlags := bytes.Cut(rest, []byte(" "))
			res.vlen, _ = strconv.Atoi(string(size))
			res.hasVal = true
			rest, more = flags, hasFlags
		}
		if more {
			if rest == nil {
				rest = []byte{} // "HD \r\n": line() is ""
			}
			res.line = rest
		}
	}
}

// mcCode maps a memcache reply line to mcmc's status and code.
func mcCode(line []byte) (status, code int) {
	if len(line) > 0 && line[0] >= '0' && line[0] <= '9' {
		return mcmcOK, codeOK // incr/decr
	}
	word, _, _ := bytes.Cut(line, []byte(" "))
	if code := mcErrorCode(word); code != 0 {
		return mcmcErr, code
	}
	if code := mcOKCode(word); code != 0 {
		return mcmcOK, code
	}
	return mcmcErr, 0
}

// mcOKCode is mcmc's code of a reply word that is not an error, or 0.
func mcOKCode(word []byte) int {
	switch string(word) {
	case "EN", "END":
		return codeEnd
	case "EX", "EXISTS":
		return codeExists
	case "HD", "ME", "OK", "VA", "VALUE", "STAT":
		return codeOK
	case "MN":
		return codeNop
	case "NF", "NOT_FOUND":
		return codeNotFound
	case "NS", "NOT_STORED":
		return codeNotStored
	case "STORED":
		return codeStored
	case "DELETED":
		return codeDeleted
	case "TOUCHED":
		return codeTouched
	case "VERSION":
		return codeVersion
	}
	return 0
}

// mcErrorCode is mcmc's code of an error reply's word, or 0.
func mcErrorCode(word []byte) int {
	switch string(word) {
	case "ERROR":
		return codeError
	case "CLIENT_ERROR":
		return codeClientError
	case "SERVER_ERROR":
		return codeServerError
	}
	return 0
}

// parseRedis classifies a RESP reply: nil is a miss (MCMC_CODE_END, so
// hit() is false), an error reply is MCMC_CODE_ERROR (a server in trouble,
// -LOADING and the like, MCMC_CODE_SERVER_ERROR), anything else
// MCMC_CODE_OK.
func (res *response) parseRedis(line []byte) {
	res.line = line
	switch res.kind {
	case codec.ReplyMiss:
		res.status, res.code = mcmcOK, codeEnd
	case codec.ReplyError:
		res.code = codeError
	case codec.ReplyFailure:
		res.code = codeServerError
	default:
		res.status, res.code = mcmcOK, codeOK
	}
	if len(line) > 1 && line[0] == '$' {
		if n, err := strconv.Atoi(string(line[1:])); err == nil && n >= 0 {
			res.vlen, res.hasVal = n, true
		}
	}
}

// ok reports whether the backend answered without an error.
func (res *response) ok() bool {
	res.parse()
	return res.status == mcmcOK
}

// hit reports whether the answer is ok and not a miss (memcached: code
// other than END).
func (res *response) hit() bool {
	res.parse()
	return res.status == mcmcOK && res.code != codeEnd
}

// value returns the value block of the reply (data and "\r\n"), or nil.
func (res *response) value() []byte {
	res.parse()
	if !res.hasVal {
		return nil
	}
	i := bytes.IndexByte(res.raw, '\n')
	if i < 0 || i+1+res.vlen+2 > len(res.raw) {
		return nil
	}
	return res.raw[i+1 : i+1+res.vlen+2]
}

// thirdField returns the third of b's whitespace-separated fields, as
// bytes.Fields(b)[2] would, without allocating; ok is false when b has
// fewer than three.
func thirdField(b []byte) (f []byte, ok bool) {
	for _, c := range b {
		if c >= 0x80 { // bytes.Fields splits at Unicode spaces too
			if fs := bytes.Fields(b); len(fs) >= 3 {
				return fs[2], true
			}
			return nil, false
		}
	}
	n := 0
	for i := 0; i < len(b); {
		for i < len(b) && asciiSpace(b[i]) {
			i++
		}
		start := i
		for i < len(b) && !asciiSpace(b[i]) {
			i++
		}
		if i == start {
			break
		}
		if n++; n == 3 {
			return b[start:i], true
		}
	}
	return nil, false
}

// asciiSpace reports the ASCII bytes bytes.Fields splits at.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
