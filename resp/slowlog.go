package resp

import (
	"bytes"
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
// unix time, duration in microseconds, arguments (appendSlowArgs, as
// Redact left them), the client's address and name (CLIENT SETNAME's
// when the entry was kept).
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
		dst = redcon.AppendBulkString(dst, e.Name)
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

var (
	_ codec.ClientNamer = (*parser)(nil)
	_ codec.Redactor    = (*Dialect)(nil)
)

// ClientName implements codec.ClientNamer: the name CLIENT SETNAME (or
// HELLO's SETNAME) gave, as CLIENT LIST shows it.
func (p *parser) ClientName() string {
	if id := p.shared.Load(); id != nil {
		return id.name
	}
	return ""
}

// redacted is what Redis's slowlog shows for a secret argument.
const redacted = "(redacted)"

// Redact implements codec.Redactor: the arguments redis-server redacts
// from its slowlog (redactClientCommandArgument) are replaced: AUTH's,
// HELLO's AUTH username and password, every argument of ACL SETUSER
// after the subcommand, CONFIG SET's value of masterauth, masteruser
// and requirepass, MIGRATE's AUTH password and AUTH2 username and
// password. The copy keeps the arguments wire has (at most slowMaxArgs)
// and the count it announced. A wire that is no RESP array is kept as
// its first word, all SLOWLOG GET shows of it.
func (*Dialect) Redact(dst, wire []byte) []byte {
	args, total := slowArgs(wire)
	if len(args) == 0 { // shown as its name alone (appendSlowArgs): kept so
		name, _, _ := bytes.Cut(bytes.TrimLeft(wire, " \t"), []byte(" "))
		return append(dst, name...)
	}
	secret := secretArgs(args, total)
	if secret == nil {
		return wire
	}
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(total), 10)
	dst = append(dst, '\r', '\n')
	for i, a := range args {
		switch {
		case secret[i]:
			dst = redcon.AppendBulkString(dst, redacted)
		case a.size == len(a.have):
			dst = redcon.AppendBulk(dst, a.have)
		default: // cut short here, as wire is
			dst = append(dst, '$')
			dst = strconv.AppendInt(dst, int64(a.size), 10)
			dst = append(append(dst, '\r', '\n'), a.have...)
		}
	}
	return dst
}

// secretArgs marks which of args (of a command of total arguments) Redis
// redacts; nil for none.
func secretArgs(args []slowArg, total int) []bool {
	arg := func(i int) []byte {
		if i < len(args) {
			return args[i].have
		}
		return nil
	}
	var secret []bool
	mark := func(i int) {
		if secret == nil {
			secret = make([]bool, len(args))
		}
		if i < len(secret) {
			secret[i] = true
		}
	}
	name := arg(0)
	switch {
	case equalFold(name, "auth"):
		for i := 1; i < max(total, 2); i++ {
			mark(i)
		}
	case equalFold(name, "hello"):
		for i := 1; i < len(args); i++ {
			switch {
			case equalFold(arg(i), "auth"):
				mark(i + 1)
				mark(i + 2)
				i += 2
			case equalFold(arg(i), "setname"):
				i++
			}
		}
	case equalFold(name, "acl") && equalFold(arg(1), "setuser"):
		for i := 2; i < max(total, 3); i++ {
			mark(i)
		}
	case equalFold(name, "config") && equalFold(arg(1), "set"):
		for i := 2; i < len(args); i += 2 {
			if a := arg(i); equalFold(a, "masterauth") || equalFold(a, "masteruser") || equalFold(a, "requirepass") {
				mark(i + 1)
			}
		}
	case equalFold(name, "migrate"):
		for i := 6; i < len(args) && !equalFold(arg(i), "keys"); i++ {
			switch {
			case equalFold(arg(i), "auth"):
				mark(i + 1)
				i++
			case equalFold(arg(i), "auth2"):
				mark(i + 1)
				mark(i + 2)
				i += 2
			}
		}
	}
	return secret
}
