package mcdiff

import (
	"bytes"
	"strconv"
)

// CASMark in a Request's Wire stands for the CAS value the target last
// returned for the request's CASKey (0 when it returned none): the same
// request then races correctly against servers whose CAS values differ.
const CASMark = "\x00cas\x00"

// Request is one generated request.
type Request struct {
	Wire   []byte // may hold CASMark
	CASKey string // the key whose CAS CASMark stands for
}

// LongToken reports whether r's command line has a token longer than
// memcached's longest key (250 bytes). How such a line is framed is a
// parser's business, so differential tests skip these requests.
func (r Request) LongToken() bool {
	line, _, _ := bytes.Cut(r.Wire, []byte("\n"))
	for _, tok := range bytes.Fields(line) {
		if len(tok) > 250 {
			return true
		}
	}
	return false
}

// Session sends requests to one Target and keeps the CAS values its
// replies showed, per key, for CASMark.
type Session struct {
	T   Target
	cas map[string]uint64
}

// NewSession returns a Session on t.
func NewSession(t Target) *Session { return &Session{T: t, cas: make(map[string]uint64)} }

// Wire returns r's bytes with CASMark replaced by this session's CAS.
func (s *Session) Wire(r Request) []byte {
	if !bytes.Contains(r.Wire, []byte(CASMark)) {
		return r.Wire
	}
	return bytes.ReplaceAll(r.Wire, []byte(CASMark), strconv.AppendUint(nil, s.cas[r.CASKey], 10))
}

// Do sends r and records the CAS values of the reply.
func (s *Session) Do(r Request) ([]byte, error) {
	out, err := s.T.Do(s.Wire(r))
	if err == nil {
		s.observe(out)
	}
	return out, err
}

// Observe records the CAS values reply shows, as Do does with its own
// replies: a caller that accepts a reply one target hides and another
// shows (a quiet request's, which memcached versions treat differently)
// gives the hiding target's session the other's reply, so that both go
// on with the same CAS values.
func (s *Session) Observe(reply []byte) { s.observe(reply) }

// observe records the CAS of every gets/gats VALUE line, and of every meta
// reply line with a c flag and a k flag (the key tells whose CAS it is).
func (s *Session) observe(reply []byte) {
	forEachHeader(reply, func(line []byte) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			return
		}
		if string(f[0]) == "VALUE" {
			if len(f) == 5 {
				if v, err := strconv.ParseUint(string(f[4]), 10, 64); err == nil {
					s.cas[string(f[1])] = v
				}
			}
			return
		}
		var key string
		var cas uint64
		var hasKey, hasCAS, binary bool
		for _, t := range f[1:] {
			switch t[0] {
			case 'k':
				key, hasKey = string(t[1:]), true
			case 'b':
				binary = len(t) == 1
			case 'c':
				if v, err := strconv.ParseUint(string(t[1:]), 10, 64); err == nil && v != 0 {
					cas, hasCAS = v, true
				}
			}
		}
		if hasKey && hasCAS {
			if binary {
				key = "b:" + key
			}
			s.cas[key] = cas
		}
	})
}

// forEachHeader calls fn with every reply line of reply that is not a
// value block.
func forEachHeader(reply []byte, fn func(line []byte)) {
	for len(reply) > 0 {
		nl := bytes.Index(reply, []byte("\r\n"))
		if nl < 0 {
			fn(reply)
			return
		}
		line := reply[:nl]
		reply = reply[nl+2:]
		fn(line)
		if n, ok := valueLen(line); ok && n >= 0 && n+2 <= len(reply) {
			reply = reply[n+2:]
		}
	}
}
