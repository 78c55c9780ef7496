package memcache

import (
	"bytes"
	"errors"
	"strings"

	"shardproxy/codec"
)

// This file words a parser's rejections as memcached's built-in proxy
// does (codec.Options.ProxyErrors), observed on memcached 1.6.45:
//
//   - a command its request parser does not know (verbosity, flush_all,
//     an upper-case GET, garbage) closes the connection without a word;
//   - a known command whose line it cannot parse (too few tokens, a bad
//     length), or a line shorter than two bytes, gets "CLIENT_ERROR
//     parsing request" and the connection stays;
//   - a value not followed by "\r\n" gets "CLIENT_ERROR bad data chunk",
//     and the stream goes on after the value's announced length;
//   - whatever else closes the connection (a line too long) closes it
//     without a word: memcached's proxy drops the reply it queued.
//
// A too-long key keeps memcached's own reply, "CLIENT_ERROR bad command
// line format" (memcached's proxy forwards a one-key get or mg with it and
// passes on the backend's reply, which is that).

// proxyKnows reports whether memcached proxy's request parser knows cmd
// (a command number, 0 for none): every command this parser knows but
// flush_all and verbosity.
func proxyKnows(cmd int) bool {
	return cmd != 0 && cmd != CmdFlushAll && cmd != CmdVerbosity
}

const (
	replyParsing   = "CLIENT_ERROR parsing request\r\n"
	replyMalformed = "CLIENT_ERROR malformed request\r\n"
)

// proxyMaxKeyOffset is the furthest into its line a multi-key retrieval's
// first key may start under memcached's proxy (observed: "get" and 17
// spaces, or "gat" and a 15-digit exptime, still pass; one byte more is
// "CLIENT_ERROR malformed request"). A one-key line has no such limit.
const proxyMaxKeyOffset = 20

// parseProxy is parse in memcached proxy's words.
func (p *parser) parseProxy(buf []byte, req *codec.Request) (int, error) {
	n, err := p.parse(buf, req)
	return p.proxyWords(buf, req, n, err)
}

// proxyWords words the outcome of parsing buf into req as memcached's
// proxy does.
func (p *parser) proxyWords(buf []byte, req *codec.Request, n int, err error) (int, error) {
	if err == nil {
		if !proxyKnows(req.Cmd) {
			return 0, rejectFatal("", n)
		}
		return n, nil
	}
	// Declared here, not above: errors.As takes its address, which puts it
	// on the heap, and a request that parses should cost no allocation.
	var pe *codec.ProtocolError
	if !errors.As(err, &pe) {
		return n, err
	}
	verb := verbOf(buf)
	switch {
	case pe.Reply == replyBadChunk:
		return 0, rejectLine(replyBadChunk, pe.N)
	case len(verb) >= 2 && !proxyKnows(lookupCommand(verb)):
		return 0, rejectFatal("", pe.N)
	case pe.Close && pe.Reply == replyBadFormat: // a storage length that is no number
		return 0, rejectLine(replyParsing, pe.N)
	case pe.Close:
		return 0, rejectFatal("", pe.N)
	// kept as they are: a too-long key, a malformed multiget, a watch of
	// an unknown stream ("ERROR"), a command the proxy does not carry, a
	// value over the limit (memcached's proxy passes on its server's
	// word for it)
	case pe.Reply == "" || pe.Reply == replyBadFormat && p.keyTooLong(), pe.Reply == replyMalformed,
		string(verb) == "watch", strings.HasSuffix(pe.Reply, replyNotCarried), pe.Reply == replyTooLarge:
		return 0, pe
	}
	return 0, &codec.ProtocolError{Reply: replyParsing, N: pe.N, Discard: pe.Discard}
}

// keyTooLong reports whether a token of the rejected line after its verb
// is longer than a key may be: a one-key retrieval or meta request with a
// key over the limit keeps memcached's own reply. (A multi-key line is
// accepted with its too-long keys, which the router answers in place: see
// codec.Options.ProxyErrors.)
func (p *parser) keyTooLong() bool {
	for _, t := range p.toks[min(1, len(p.toks)):] {
		if p.tooLongKey(t) {
			return true
		}
	}
	return false
}

// verbOf returns the first token of buf's first line.
func verbOf(buf []byte) []byte {
	if i := bytes.IndexByte(buf, '\n'); i >= 0 {
		buf = buf[:i]
	}
	buf = bytes.TrimRight(buf, "\r")
	buf = bytes.TrimLeft(buf, " ")
	if i := bytes.IndexByte(buf, ' '); i >= 0 {
		buf = buf[:i]
	}
	return buf
}

// watchNames are the streams memcached's watch command knows, in the order
// it tries them, with the codec.Watch* bit of each the proxy writes
// (memcached's proxy has no others: their watchers get nothing).
var watchNames = []struct {
	name string
	bit  int
}{
	{"rawcmds", 0}, {"evictions", 0}, {"fetchers", 0}, {"mutations", 0},
	{"sysevents", 0}, {"connevents", 0},
	{"proxyreqs", codec.WatchProxyReqs}, {"proxyevents", codec.WatchProxyEvents},
	{"proxyuser", codec.WatchProxyUser}, {"deletions", codec.WatchDeletions},
}

// watch: watch [stream]*, memcached's log streams (RouteWatch, the streams
// in req.Arg). As memcached does, a token names the first stream it is a
// prefix of ("proxy" is proxyreqs), no token means fetchers, and an
// unknown one is answered "ERROR" (the connection stays).
func (p *parser) watch(l *line, req *codec.Request) (int, error) {
	n := l.n()
	streams := 0
	for _, t := range p.toks[1:] {
		tok := string(l.tok(t))
		found := false
		for _, w := range watchNames {
			if strings.HasPrefix(w.name, tok) {
				streams |= w.bit
				found = true
				break
			}
		}
		if !found {
			return 0, rejectLine(replyError, n)
		}
	}
	if r := p.denied(l.cmd); r != "" {
		return 0, rejectLine(r, n)
	}
	fill(l.buf, req, l.cmd, wire{n: n, eol: l.eol}, 0)
	req.Route = codec.RouteWatch
	req.Arg = streams
	return n, nil
}
