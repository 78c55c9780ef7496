package resp

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"

	"shardproxy/codec"
)

// Request limits used where codec.Options leaves a field zero.
const (
	// DefaultMaxLine is redis-server's PROTO_INLINE_MAX_SIZE (64 KiB): the
	// longest inline command, and the longest multibulk count or bulk
	// length line.
	DefaultMaxLine = 64 << 10
	// DefaultMaxValue is redis-server's default proto-max-bulk-len
	// (512 MiB): the longest bulk string in a request.
	DefaultMaxValue = 512 << 20
	// MaxArgs is the most arguments one request may have (1024*1024, the
	// multibulk limit of Redis before 7.0, which allows INT_MAX).
	MaxArgs = 1 << 20
	// requestSlack is what a request may hold beyond its largest value and a
	// line's worth of other arguments.
	requestSlack = 4096
)

// span is an argument's [start, end) offsets in parser.src.
type span struct{ start, end int }

// parser is the codec.RequestParser of one client session. It holds the
// session's state that Redis keeps per connection: whether the client has
// authenticated, its name and its id.
type parser struct {
	maxLine     int
	maxValue    int
	maxKey      int // 0: no limit beyond maxValue
	maxRequest  int
	password    string
	username    string
	db          int
	deny        []bool // by Cmd
	serverInfo  bool   // INFO goes to the servers (codec.Options.ServerInfo)
	keyspace    bool   // SCAN, KEYS, ... are carried (codec.Options.Keyspace)
	resp2Only   bool   // HELLO 3 is refused (codec.Options.RESP2Only)
	config      bool   // CONFIG GET, SET, ... are carried (codec.Options.ServerConfig)
	clusterView bool   // CLUSTER SLOTS, ... are answered (codec.Options.ClusterView)
	scriptsOwn  bool   // scripts run on dedicated connections (codec.Options.DedicatedScripts)
	withLocal   bool   // the CONFIG being parsed sets or gets a setting the proxy keeps (refusal to keyed)

	authed bool
	id     int64
	name   []byte                   // CLIENT SETNAME
	slowN  int                      // SLOWLOG GET's count, for AppendLocal (slowlog.go)
	proto  uint8                    // 3 after HELLO 3, else 0 (RESP2): codec.Request.Proto
	shared atomic.Pointer[identity] // name and proto, for CLIENT LIST on any goroutine (clients.go)
	aware  bool                     // asked for the cluster's map (clusterview.go)

	// The state before the last request changed it (saved), for UndoState.
	saved      bool
	savedAuth  bool
	savedProto uint8
	savedName  []byte

	// The request being parsed: its arguments are src[args[i].start:args[i].end].
	src       []byte
	args      []span
	canonical bool   // src is a well-formed multibulk frame, forwarded as it is
	inline    []byte // an inline command's unquoted arguments
	keyPos    []int
	reply     []byte   // a local command's reply, before it goes to req.Buf
	lower     [64]byte // a command name in lower case
}

var (
	_ codec.RequestParser = (*parser)(nil)
	_ codec.StateUndoer   = (*parser)(nil)
)

// save keeps the session's state before a local command changes it.
func (p *parser) save() {
	p.saved, p.savedAuth, p.savedProto = true, p.authed, p.proto
	p.savedName = append(p.savedName[:0], p.name...)
}

// UndoState implements codec.StateUndoer: the authentication, protocol
// and name the last request changed are as they were before it.
func (p *parser) UndoState() {
	if p.saved {
		p.saved, p.authed, p.proto = false, p.savedAuth, p.savedProto
		p.name = append(p.name[:0], p.savedName...)
		p.publish()
	}
}

// clientIDs numbers sessions for CLIENT ID and HELLO.
var clientIDs atomic.Int64

func newParser(o codec.Options) *parser {
	p := &parser{
		maxLine:  orDefault(o.MaxLine, DefaultMaxLine),
		maxValue: orDefault(o.MaxValue, DefaultMaxValue),
		maxKey:   max(o.MaxKey, 0),
		password: o.Password,
		username: o.Username,
		db:       o.DB,
		id:       clientIDs.Add(1),

		serverInfo:  o.ServerInfo,
		keyspace:    o.Keyspace,
		resp2Only:   o.RESP2Only,
		config:      o.ServerConfig,
		clusterView: o.ClusterView,
		scriptsOwn:  o.DedicatedScripts,
	}
	p.maxRequest = p.maxValue + p.maxLine + requestSlack
	p.authed = p.password == ""
	p.publish()
	p.deny = denyTable(o.Deny)
	return p
}

// denyTables holds the deny table of each deny list a parser was made
// with (its names joined): the sessions of a pool share one, read-only,
// which stays in the cache where a table of each session's own did not.
var denyTables sync.Map

// denyTable returns the table, by Cmd, of the commands names forbid, or
// nil when they forbid none. A name is a command or "container|sub"; a
// container forbids its subcommands. The memcached name "flush_all",
// which a pool denies when its flush_all key is false, forbids FLUSHDB
// and FLUSHALL.
func denyTable(names []string) []bool {
	if len(names) == 0 {
		return nil
	}
	key := strings.Join(names, "\x00")
	if t, ok := denyTables.Load(key); ok {
		return t.([]bool)
	}
	t := make([]bool, len(commandTable)+1)
	some := false
	mark := func(name string) {
		if cmd := lookup(strings.ToLower(name)); cmd != 0 {
			t[cmd], some = true, true
		}
	}
	for _, name := range names {
		if name == "flush_all" {
			mark("flushall")
			name = "flushdb"
		}
		mark(name)
	}
	for cmd := 1; cmd < len(t); cmd++ {
		if c := containerOf(cmd); c != 0 && t[c] {
			t[cmd] = true
		}
	}
	if !some {
		t = nil
	}
	v, _ := denyTables.LoadOrStore(key, t)
	return v.([]bool)
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// authRequired reports whether the client must still AUTH.
func (p *parser) authRequired() bool { return !p.authed }

func (p *parser) argc() int { return len(p.args) }

func (p *parser) arg(i int) []byte { s := p.args[i]; return p.src[s.start:s.end] }

// ParseRequest implements codec.RequestParser. Empty requests (a blank
// inline line, "*0\r\n", "*-1\r\n"), which redis-server skips without a
// reply, are skipped as part of the next request; more than MaxLine bytes
// of them are swallowed as a ProtocolError with no reply, so that they are
// never buffered.
func (p *parser) ParseRequest(buf []byte, req *codec.Request) (int, error) {
	defer p.trim()
	p.saved = false
	skipped := 0
	for {
		if skipped > p.maxLine {
			// Swallow a long run of empty requests rather than buffer it.
			return 0, &codec.ProtocolError{N: skipped}
		}
		n, err := p.frame(buf[skipped:])
		if err == nil && len(p.args) == 0 {
			skipped += n
			continue
		}
		if err == nil {
			n, err = p.request(buf[skipped:skipped+n], req)
		}
		if pe, ok := err.(*codec.ProtocolError); ok { // never wrapped
			pe.N += skipped
			return 0, pe
		}
		if err != nil {
			return 0, err
		}
		req.Proto = p.proto
		return skipped + n, nil
	}
}

// Scratch kept between requests; a rare huge request's is let go.
const (
	keepArgs  = 4096
	keepReply = 64 << 10
)

// trim drops scratch space a huge request grew, so that an idle session
// does not hold it.
func (p *parser) trim() {
	if cap(p.args) > keepArgs {
		p.args = nil
	}
	if cap(p.keyPos) > keepArgs {
		p.keyPos = nil
	}
	if cap(p.reply) > keepReply {
		p.reply = nil
	}
	p.src = nil
}

// frame finds the request at the start of buf, as redis-server's
// processMultibulkBuffer and processInlineBuffer do, and points p.args at
// its arguments. It returns the request's length.
func (p *parser) frame(buf []byte) (int, error) {
	p.args = p.args[:0]
	p.canonical = false
	if len(buf) == 0 {
		return 0, codec.ErrIncomplete
	}
	if buf[0] == '*' {
		return p.frameMultibulk(buf)
	}
	return p.frameInline(buf)
}

// headerLine finds the '\r' ending the count or length line at buf[pos:]
// and returns its index once the byte after it has arrived. Like
// redis-server's strchr, the search stops at a NUL, and a line not ended
// within maxLine bytes is an error whatever arrives later.
func (p *parser) headerLine(buf []byte, pos int, tooBig string) (int, error) {
	window := buf[pos:min(len(buf), pos+p.maxLine+1)]
	i := bytes.IndexByte(window, '\r')
	if i >= 0 && bytes.IndexByte(window[:i], 0) >= 0 {
		i = -1
	}
	if i < 0 {
		if len(buf)-pos > p.maxLine {
			return 0, rejectFatal(tooBig, len(buf))
		}
		return 0, codec.ErrIncomplete
	}
	r := pos + i
	if r+1 >= len(buf) { // redis-server wants one more byte, the '\n' it skips unread
		return 0, codec.ErrIncomplete
	}
	return r, nil
}

// header reads the count or length line at buf[pos:] (its first byte, '*'
// or '$', is the caller's to check): the index of the '\r' ending it, and
// its number; ok is false when the line holds no number redis-server
// accepts. The usual line, a short number, is read in one pass;
// headerLine and parseInt judge every other one, and would judge the usual
// one the same (FuzzHeader checks).
func (p *parser) header(buf []byte, pos int, tooBig string) (r int, v int64, ok bool, err error) {
	if v, r, ok := p.shortHeader(buf, pos); ok {
		return r, v, true, nil
	}
	if r, err = p.headerLine(buf, pos, tooBig); err != nil {
		return 0, 0, false, err
	}
	if r == pos { // the line is empty: not even its type byte
		return r, 0, false, nil
	}
	v, ok = parseInt(buf[pos+1 : r])
	return r, v, ok, nil
}

// shortHeader reads a line of '$' or '*' and 1 to 18 digits (no leading
// zero, or "0" alone) ended by '\r' with a byte after it, within maxLine;
// ok is false for anything else.
func (p *parser) shortHeader(buf []byte, pos int) (v int64, r int, ok bool) {
	i := pos + 1
	if i >= len(buf) || buf[pos] != '$' && buf[pos] != '*' || buf[i]-'0' > 9 {
		return 0, 0, false
	}
	if buf[i] == '0' {
		i++
	} else {
		for end := min(len(buf), pos+1+18); i < end && buf[i]-'0' <= 9; i++ {
			v = v*10 + int64(buf[i]-'0')
		}
	}
	if i+1 >= len(buf) || buf[i] != '\r' || i-pos > p.maxLine {
		return 0, 0, false
	}
	return v, i, true
}

// frameMultibulk frames "*<count>\r\n" and count "$<len>\r\n<data>\r\n".
// redis-server skips the two bytes after a header's '\r' and after bulk
// data without looking at them; so does the parser, and it re-encodes such
// a request for the backend.
func (p *parser) frameMultibulk(buf []byte) (int, error) {
	pos, count, err := p.multibulkCount(buf)
	if err != nil {
		return 0, err
	}
	for range count {
		r, size, ok, err := p.header(buf, pos, replyTooBigBulkCount)
		if err != nil {
			return 0, err
		}
		if buf[pos] != '$' {
			return 0, rejectFatal(errorLine("Protocol error: expected '$', got '"+string(buf[pos])+"'"), r+2)
		}
		switch {
		case !ok || size < 0 || size > int64(p.maxValue):
			return 0, rejectFatal(replyBadBulkLength, r+2)
		case size > 16384 && p.authRequired():
			return 0, rejectFatal(replyUnauthBulk, r+2)
		}
		start := r + 2
		end := start + int(size)
		if end+2 > p.maxRequest {
			return 0, rejectFatal(errorLine("Protocol error: request larger than the proxy's limit of "+
				string(appendInt(nil, int64(p.maxRequest)))+" bytes"), r+2)
		}
		if len(buf) < end+2 {
			return 0, codec.Incomplete(end + 2)
		}
		if buf[r+1] != '\n' || buf[end] != '\r' || buf[end+1] != '\n' {
			p.canonical = false
		}
		p.args = append(p.args, span{start, end})
		pos = end + 2
	}
	return pos, nil
}

// multibulkCount reads a multibulk request's "*<count>\r\n" line and
// returns the offset after it and the count, which it checks against
// MaxArgs (and, before authentication, redis-server's lower limit).
func (p *parser) multibulkCount(buf []byte) (pos int, count int64, err error) {
	p.src, p.canonical = buf, true
	r, count, ok, err := p.header(buf, 0, replyTooBigCount)
	if err != nil {
		return 0, 0, err
	}
	if !ok || count > MaxArgs {
		return 0, 0, rejectFatal(replyBadCount, r+2)
	}
	if count > 10 && p.authRequired() {
		return 0, 0, rejectFatal(replyUnauthCount, r+2)
	}
	p.canonical = buf[r+1] == '\n'
	return r + 2, count, nil
}

// frameInline frames one inline command line. redis-server finds the
// newline with strchr, which stops at a NUL: a line holding a NUL never
// ends, and fails once it is over the limit.
func (p *parser) frameInline(buf []byte) (int, error) {
	window := buf[:min(len(buf), p.maxLine+1)]
	nl := bytes.IndexByte(window, '\n')
	if nl >= 0 && bytes.IndexByte(window[:nl], 0) >= 0 {
		nl = -1
	}
	if nl < 0 {
		if len(buf) > p.maxLine {
			return 0, rejectFatal(replyTooBigInline, len(buf))
		}
		return 0, codec.ErrIncomplete
	}
	end := nl
	if end > 0 && buf[end-1] == '\r' {
		end--
	}
	if !p.splitArgs(buf[:end]) {
		return 0, rejectFatal(replyUnbalanced, nl+1)
	}
	return nl + 1, nil
}
