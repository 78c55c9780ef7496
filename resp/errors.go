package resp

import (
	"errors"
	"fmt"
	"strings"

	"shardproxy/codec"
)

// Reply framing errors. ParseReply wraps them with the offending bytes
// (quoted, cut to 64 bytes); match them with errors.Is. Each one means the
// backend stream cannot be trusted any more.
var (
	// ErrReplyType reports a reply that starts with no RESP2 or RESP3
	// type byte.
	ErrReplyType = errors.New("resp: unexpected reply type")
	// ErrReplyLineTooLong reports a reply line longer than MaxReplyLine.
	ErrReplyLineTooLong = errors.New("resp: reply line too long")
	// ErrReplyLineEnding reports a reply line not ended by "\r\n".
	ErrReplyLineEnding = errors.New("resp: reply line not terminated by \\r\\n")
	// ErrReplyLength reports a bulk length or element count that is no
	// number or out of range.
	ErrReplyLength = errors.New("resp: bad length in reply")
	// ErrReplyInteger reports an integer reply that is no integer.
	ErrReplyInteger = errors.New("resp: bad integer reply")
	// ErrReplyScalar reports a RESP3 null, double, boolean or big
	// number whose line is not one.
	ErrReplyScalar = errors.New("resp: bad RESP3 scalar reply")
	// ErrReplyVerbatim reports a RESP3 verbatim string without its
	// three-letter format and ':'.
	ErrReplyVerbatim = errors.New("resp: bad RESP3 verbatim string")
	// ErrReplyBulkEnding reports bulk data not followed by "\r\n".
	ErrReplyBulkEnding = errors.New("resp: bulk data not followed by \\r\\n")
)

// replyErr wraps a framing sentinel with the bytes that caused it.
func replyErr(sentinel error, b []byte) error {
	const show = 64
	if len(b) > show {
		b = b[:show]
	}
	return fmt.Errorf("%w: %q", sentinel, b)
}

// Client error replies, worded as redis-server 7.0 words them.
const (
	replyNoAuth          = "-NOAUTH Authentication required.\r\n"
	replyWrongPass       = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	replyNoPassword      = "-ERR Client sent AUTH, but no password is set\r\n" // twemproxy's, kept for drop-in clients
	replySyntax          = "-ERR syntax error\r\n"
	replyNotInteger      = "-ERR value is not an integer or out of range\r\n"
	replyIntRange        = "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n"
	replyDBRange         = "-ERR DB index is out of range\r\n"
	replyProtoVersion    = "-ERR Protocol version is not an integer or out of range\r\n"
	replyNoProto         = "-NOPROTO unsupported protocol version\r\n"
	replyHelloNoAuth     = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
	replyBadClientName   = "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"
	replyTooBigInline    = "-ERR Protocol error: too big inline request\r\n"
	replyTooBigCount     = "-ERR Protocol error: too big mbulk count string\r\n"
	replyTooBigBulkCount = "-ERR Protocol error: too big bulk count string\r\n"
	replyBadCount        = "-ERR Protocol error: invalid multibulk length\r\n"
	replyBadBulkLength   = "-ERR Protocol error: invalid bulk length\r\n"
	replyUnauthCount     = "-ERR Protocol error: unauthenticated multibulk length\r\n"
	replyUnauthBulk      = "-ERR Protocol error: unauthenticated bulk length\r\n"
	replyUnbalanced      = "-ERR Protocol error: unbalanced quotes in request\r\n"
)

// reject refuses one request of n bytes; the connection stays open.
func reject(reply string, n int) *codec.ProtocolError {
	return &codec.ProtocolError{Reply: reply, N: n}
}

// rejectFatal refuses a request after which the stream cannot be trusted:
// redis-server closes the connection after every protocol error, and so
// does the proxy.
func rejectFatal(reply string, n int) *codec.ProtocolError {
	return &codec.ProtocolError{Reply: reply, Close: true, N: n}
}

// errorLine returns "-ERR <msg>\r\n" with line breaks in msg turned into
// spaces, as redis-server's addReplyErrorFormat does.
func errorLine(msg string) string {
	b := make([]byte, 0, len("-ERR \r\n")+len(msg))
	b = append(b, "-ERR "...)
	for i := range len(msg) {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return string(append(b, "\r\n"...))
}

// asciiUpper upper-cases the ASCII letters of s and leaves every other
// byte alone, as C's toupper does.
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// maxQuoted bounds how much of a client's argument an error reply quotes
// where redis-server quotes it whole.
const maxQuoted = 64 << 10

// cString cuts b at its first NUL and then at max bytes: what C's "%.*s"
// prints of it.
func cString(b []byte, max int) string {
	for i, c := range b {
		if c == 0 {
			b = b[:i]
			break
		}
	}
	if len(b) > max {
		b = b[:max]
	}
	return string(b)
}

// unknownCommand words redis-server's reply to a command it does not know:
// the name and the first arguments, quoted, up to about 128 bytes.
func unknownCommand(a argView) string {
	var args strings.Builder
	for i := 1; i < a.argc() && args.Len() < 128; i++ {
		fmt.Fprintf(&args, "'%s' ", cString(a.arg(i), 128-args.Len()))
	}
	return errorLine(fmt.Sprintf("unknown command '%s', with args beginning with: %s", cString(a.arg(0), 128), args.String()))
}

// unknownSubcommand words redis-server's reply to a container command
// (CLIENT, OBJECT, ...) with a subcommand it does not know.
func unknownSubcommand(a argView) string {
	return errorLine(fmt.Sprintf("unknown subcommand '%s'. Try %s HELP.",
		cString(a.arg(1), 128), asciiUpper(cString(a.arg(0), maxQuoted))))
}

// wrongArity words redis-server's reply to a wrong number of arguments.
func wrongArity(name string) string {
	return errorLine("wrong number of arguments for '" + name + "' command")
}

// displayName is a command's name as an error shows it: "CLIENT LIST".
func displayName(name string) string {
	return asciiUpper(strings.ReplaceAll(name, "|", " "))
}

// notSupported words the reply to a command the proxy does not carry.
func notSupported(name, reason string) string {
	return errorLine(displayName(name) + " is not supported by shardproxy: " + reason)
}
