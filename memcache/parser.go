package memcache

import (
	"bytes"
	"strings"

	"shardproxy/codec"
)

// Request limits used where codec.Options leaves a field zero.
const (
	// DefaultMaxKey is memcached's KEY_MAX_LENGTH: the longest key in bytes.
	DefaultMaxKey = 250
	// DefaultMaxLine is the longest retrieval line (get, gets, gat, gats)
	// read whole. A longer one, which memcached serves too, is cut into
	// parts of at most this many bytes as it streams in (stream.go).
	DefaultMaxLine = 64 << 10
	// MaxCommandLine bounds every other request line. memcached closes a
	// connection that sends 2048 bytes without a newline unless the line is
	// a get or gets.
	MaxCommandLine = 2048
	// DefaultMaxValue is memcached's default item_size_max (-I 1m): the
	// largest value a storage request may carry.
	DefaultMaxValue = 1 << 20
)

// span is a token's [start, end) offsets in the client's buffer.
type span struct{ start, end int }

// parser is the codec.RequestParser of one client session.
type parser struct {
	maxKey   int
	maxLine  int // retrieval lines
	cmdLine  int // every other line
	maxValue int
	deny     [numCmds]bool
	metaGets bool   // a one-key get or gets goes to the backend as mg
	proxy    bool   // memcached proxy's words (codec.Options.ProxyErrors)
	wire     bool   // memcached proxy's quiet and noreply wire (codec.Options.ProxyWire)
	v1       bool   // memcached 1.6.22 proxy's words (codec.Options.ProxyV1)
	toks     []span // tokens of the current line, reused
	st       stream // the retrieval line being cut into parts
}

var _ codec.RequestParser = (*parser)(nil)

func newParser(l codec.Options) *parser {
	p := &parser{
		maxKey:   orDefault(l.MaxKey, DefaultMaxKey),
		maxLine:  orDefault(l.MaxLine, DefaultMaxLine),
		maxValue: orDefault(l.MaxValue, DefaultMaxValue),
		metaGets: l.MetaGets,
		proxy:    l.ProxyErrors,
		wire:     l.ProxyWire,
		v1:       l.ProxyV1,
	}
	p.cmdLine = min(MaxCommandLine, p.maxLine)
	for _, name := range l.Deny {
		if cmd := lookupCommand([]byte(name)); cmd != 0 {
			p.deny[cmd] = true
		}
	}
	return p
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// line is the request line being parsed.
type line struct {
	buf  []byte // the client's bytes, from the start of the request
	text []byte // the line as memcached sees it: no "\r\n", cut at a NUL
	eol  int    // index of the line's '\n' in buf
	cmd  int
}

// n is the length of the line including its newline.
func (l *line) n() int { return l.eol + 1 }

func (l *line) tok(s span) []byte { return l.text[s.start:s.end] }

// ParseRequest implements codec.RequestParser.
func (p *parser) ParseRequest(buf []byte, req *codec.Request) (int, error) {
	if p.st.cmd != 0 {
		return p.nextPart(buf, req, true)
	}
	if p.proxy {
		return p.parseProxy(buf, req)
	}
	return p.parse(buf, req)
}

// parse parses a request in memcached's own words.
func (p *parser) parse(buf []byte, req *codec.Request) (int, error) {
	eol, err := p.frameLine(buf)
	if err == errLongLine {
		return p.firstPart(buf, req, true)
	}
	if err != nil {
		return 0, err
	}
	text := buf[:withoutCR(buf, eol)]
	if i := bytes.IndexByte(text, 0); i >= 0 { // memcached stops at a NUL (strlen)
		text = text[:i]
	}
	p.tokenize(text)
	l := &line{buf: buf, text: text, eol: eol}
	if len(p.toks) == 0 || p.toks[0].end-p.toks[0].start < 2 {
		return 0, rejectLine(replyError, l.n())
	}
	verb := l.tok(p.toks[0])
	l.cmd = lookupCommand(verb)
	switch {
	case l.cmd == 0, l.cmd == CmdWatch && !p.proxy:
		return 0, p.unknown(l, verb)
	case l.cmd == CmdWatch:
		return p.watch(l, req)
	case isRetrieval(l.cmd):
		return p.retrieval(l, req)
	case isStorage(l.cmd):
		return p.storage(l, req)
	case l.cmd == CmdMetaSet:
		return p.metaSet(l, req)
	case isMeta(l.cmd):
		return p.meta(l, req)
	}
	return p.otherCommand(l, req)
}

// withoutCR returns where the text of the line whose '\n' is at buf[eol]
// ends: before its "\r\n", as memcached reads it ("\r" alone on a line
// stays).
func withoutCR(buf []byte, eol int) int {
	if eol > 1 && buf[eol-1] == '\r' {
		return eol - 1
	}
	return eol
}

// otherCommand parses the request line l of a command that is neither a
// retrieval, a storage nor a meta command.
func (p *parser) otherCommand(l *line, req *codec.Request) (int, error) {
	switch l.cmd {
	case CmdIncr, CmdDecr, CmdTouch:
		return p.keyNumber(l, req)
	case CmdDelete:
		return p.delete(l, req)
	case CmdFlushAll:
		return p.flushAll(l, req)
	case CmdVerbosity:
		return p.verbosity(l, req)
	}
	return p.local(l, req) // version, quit, stats, mn
}

// frameLine finds the end of the request line. A line longer than its
// limit fails whether or not its newline has arrived, so the outcome never
// depends on how the bytes were split into reads; a retrieval line longer
// than maxLine is no failure but errLongLine: it is cut into parts
// (stream.go).
func (p *parser) frameLine(buf []byte) (eol int, err error) {
	window := buf[:min(len(buf), p.maxLine+2)]
	eol = bytes.IndexByte(window, '\n')
	var l int
	if eol < 0 {
		l = len(buf)
		if l > 0 && buf[l-1] == '\r' {
			l-- // the '\r' may be the start of "\r\n"
		}
	} else {
		l = withoutCR(buf, eol)
	}
	if l > p.cmdLine-2 { // (gat's limit)
		cmd := retrievalHead(buf[:min(len(buf), p.cmdLine+1)])
		switch {
		case cmd != 0 && l > p.lineLimit(cmd):
			return 0, errLongLine
		case cmd != 0 || l <= p.cmdLine:
		case eol < 0:
			return 0, rejectFatal(replyLineTooLong, len(buf))
		default:
			return 0, rejectFatal(replyLineTooLong, eol+1)
		}
	}
	if eol < 0 {
		return 0, codec.ErrIncomplete
	}
	return eol, nil
}

// retrievalHead returns the command of a line starting with head when it
// may be longer than MaxCommandLine: only a retrieval line may, and only
// when its verb and the space after it lie in head. Else it returns 0.
func retrievalHead(head []byte) int {
	i := 0
	for i < len(head) && head[i] == ' ' {
		i++
	}
	j := bytes.IndexByte(head[i:], ' ')
	if j < 0 {
		return 0
	}
	if cmd := lookupCommand(head[i : i+j]); isRetrieval(cmd) {
		return cmd
	}
	return 0
}

// lineLimit is the longest line of a retrieval command cmd read whole
// (without its "\r\n"); a longer one is cut into parts no longer than
// that. A gat or gats line stays within MaxCommandLine with its "\r\n":
// memcached drops the connection of one longer than that when its newline
// is not in the same read (observed: a server socket the proxy sends it
// on), where it waits for a get or gets line however long it is.
func (p *parser) lineLimit(cmd int) int {
	if isTouching(cmd) {
		return p.cmdLine - 2
	}
	return p.maxLine
}

// tokenize splits text at spaces (only spaces, as memcached does) into
// p.toks.
func (p *parser) tokenize(text []byte) {
	p.toks = p.toks[:0]
	i := 0
	for {
		for i < len(text) && text[i] == ' ' {
			i++
		}
		if i == len(text) {
			return
		}
		j := bytes.IndexByte(text[i:], ' ')
		if j < 0 {
			p.toks = append(p.toks, span{i, len(text)})
			return
		}
		p.toks = append(p.toks, span{i, i + j})
		i += j
	}
}

// lastIs reports whether the line's last token is word.
func (p *parser) lastIs(l *line, word string) bool {
	return len(p.toks) > 1 && string(l.tok(p.toks[len(p.toks)-1])) == word
}

// tooLongKey reports whether the key token s is over the key limit.
func (p *parser) tooLongKey(s span) bool { return s.end-s.start > p.maxKey }

// denied returns the reply to a command the pool forbids, or "".
func (p *parser) denied(cmd int) string {
	if !p.deny[cmd] {
		return ""
	}
	return "CLIENT_ERROR " + cmdNames[cmd] + replyDisabledSuffix
}

// unknown rejects a verb that is no command the proxy carries.
func (p *parser) unknown(l *line, verb []byte) error {
	if name := notCarried(verb); name != "" {
		return rejectLine("CLIENT_ERROR "+name+replyNotCarried, l.n())
	}
	// memcached drops, without a word, a connection whose unknown command
	// line ends in an HTTP version: someone is speaking HTTP to it. Verbs
	// starting with a letter it dispatches on first answer ERROR instead.
	first := verb[0]
	isMetaLike := first == 'm' && len(verb) == 2
	if !isMetaLike && strings.IndexByte("gsacidt", first) < 0 &&
		bytes.HasPrefix(l.tok(p.toks[len(p.toks)-1]), []byte("HTTP/")) {
		return rejectFatal("", l.n())
	}
	return rejectLine(replyError, l.n())
}
