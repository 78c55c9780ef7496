package resp

import (
	"strconv"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// Redis's limits on what a slowlog entry shows of a command
// (SLOWLOG_ENTRY_MAX_ARGC, SLOWLOG_ENTRY_MAX_STRING).
const (
	slowMaxArgs   = 32
	slowMaxString = 128
	// slowDefault is how many entries SLOWLOG GET gives without a count.
	slowDefault = 10
)

// slowlogCount reads SLOWLOG GET's count into p.slowN (-1: all), or
// returns the error reply that refuses it, in Redis 7's words.
func (p *parser) slowlogCount() string {
	p.slowN = slowDefault
	switch p.argc() {
	case 2:
		return ""
	case 3:
	default:
		return wrongArity("slowlog|get")
	}
	n, ok := parseInt(p.arg(2))
	switch {
	case !ok:
		return replyNotInteger
	case n < -1:
		return "-ERR count should be greater than or equal to -1\r\n"
	case n == -1 || n > 1<<20:
		p.slowN = -1
	default:
		p.slowN = int(n)
	}
	return ""
}

// appendSlowlog answers SLOWLOG GET (n entries, -1 all), LEN and RESET
// from env's slowlog, in Redis's format: each entry an array of its ID,
// unix time, duration in microseconds, arguments (appendSlowArgs), the
// client's address and name. The proxy does not know the client's name
// where it keeps an entry: it is always empty.
func appendSlowlog(dst []byte, cmd localCmd, n int, env codec.Env) []byte {
	sl, ok := env.(codec.SlowlogEnv)
	if !ok {
		return redcon.AppendError(dst, "ERR this pool keeps no slowlog")
	}
	switch cmd {
	case localSlowlogLen:
		return redcon.AppendInt(dst, int64(sl.SlowlogLen()))
	case localSlowlogReset:
		sl.SlowlogReset()
		return redcon.AppendOK(dst)
	}
	es := sl.Slowlog(n)
	dst = redcon.AppendArray(dst, len(es))
	for _, e := range es {
		dst = redcon.AppendArray(dst, 6)
		dst = redcon.AppendInt(dst, e.ID)
		dst = redcon.AppendInt(dst, e.Time.Unix())
		dst = redcon.AppendInt(dst, e.Took.Microseconds())
		dst = appendSlowArgs(dst, e.Wire, e.Command)
		dst = redcon.AppendBulkString(dst, e.Client)
		dst = redcon.AppendBulkString(dst, "")
	}
	return dst
}

// appendSlowArgs appends, as an array of bulk strings, the arguments of
// wire, a RESP command as the client sent it and possibly cut short: at
// most slowMaxArgs, the last then saying how many more there were, each
// at most slowMaxString bytes, then saying how many more it had, as
// Redis's slowlog shows them. Of an argument or a count the cut took, it
// shows what it has; what the wire cannot tell is not shown. An inline
// command or a wire that is no RESP array shows as name alone.
func appendSlowArgs(dst, wire []byte, name string) []byte {
	args, total := slowArgs(wire)
	if len(args) == 0 {
		dst = redcon.AppendArray(dst, 1)
		return redcon.AppendBulkString(dst, name)
	}
	shown := min(len(args), slowMaxArgs)
	if total > slowMaxArgs && shown == slowMaxArgs {
		shown--
	}
	more := total > shown
	dst = redcon.AppendArray(dst, shown+btoi(more))
	for _, a := range args[:shown] {
		have := a.have[:min(len(a.have), slowMaxString)]
		if a.size > len(have) { // long, or cut
			s := append(have[:len(have):len(have)], "... ("...)
			s = strconv.AppendInt(s, int64(a.size-len(have)), 10)
			dst = redcon.AppendBulk(dst, append(s, " more bytes)"...))
			continue
		}
		dst = redcon.AppendBulk(dst, have)
	}
	if more {
		dst = redcon.AppendBulkString(dst, "... ("+strconv.Itoa(total-shown)+" more arguments)")
	}
	return dst
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slowArg is an argument of a cut wire: the bytes it has, and the size
// its header announced.
type slowArg struct {
	have []byte
	size int
}

// slowArgs reads the arguments of wire, a RESP array of bulk strings that
// may be cut anywhere, up to slowMaxArgs of them: what each has, and how
// many the array announced. It never reads past wire, and takes no
// announced count or size at its word beyond what wire holds.
func slowArgs(wire []byte) (args []slowArg, total int) {
	if len(wire) < 4 || wire[0] != '*' {
		return nil, 0
	}
	total, rest, ok := slowHeader(wire[1:])
	if !ok || total <= 0 {
		return nil, 0
	}
	for len(args) < min(total, slowMaxArgs) && len(rest) > 0 {
		if rest[0] != '$' {
			break
		}
		size, body, ok := slowHeader(rest[1:])
		if !ok || size < 0 {
			break
		}
		have := body[:min(size, len(body))]
		args = append(args, slowArg{have: have, size: size})
		if size+2 > len(body) {
			break // the cut is in this argument
		}
		rest = body[size+2:]
	}
	return args, total
}

// slowHeader reads "<n>\r\n" at the start of b: n and what follows.
func slowHeader(b []byte) (n int, rest []byte, ok bool) {
	i := 0
	for i < len(b) && i < 12 && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int(b[i]-'0')
		i++
	}
	if i == 0 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, nil, false
	}
	return n, b[i+2:], true
}
