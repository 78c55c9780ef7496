package main

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// A value is "KEY|VERSION|CRC" where CRC is the crc32 of "KEY|VERSION", so
// every reply names the key and the write it came from and a corrupted or
// misrouted value is caught.
func encodeValue(key string, version uint64) string {
	body := key + "|" + strconv.FormatUint(version, 10)
	return fmt.Sprintf("%s|%08x", body, crc32.ChecksumIEEE([]byte(body)))
}

// decodeValue returns the key and version a value encodes; ok is false when
// the value is not one encodeValue made.
func decodeValue(v string) (key string, version uint64, ok bool) {
	i := strings.LastIndexByte(v, '|')
	if i < 0 {
		return "", 0, false
	}
	body, sum := v[:i], v[i+1:]
	if fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(body))) != sum {
		return "", 0, false
	}
	j := strings.LastIndexByte(body, '|')
	if j < 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(body[j+1:], 10, 64)
	if err != nil {
		return "", 0, false
	}
	return body[:j], n, true
}

// keyState is what one client knows about one of its own keys.
//
// The rule a get reply is checked against: for a key only this client
// writes, after the set of version A was acknowledged (STORED / +OK), a get
// sent later must return a miss, an error, version A, or a version U whose
// set was sent but never acknowledged (it got an error or no reply, so the
// server may or may not have applied it, possibly late, on a socket the
// proxy already gave up on). Anything else is wrong: an older acknowledged
// version (a lost update), a version never sent, another key's value, or
// bytes that do not decode.
type keyState struct {
	acked     uint64              // last acknowledged version; 0 = none
	uncertain map[uint64]struct{} // sets with unknown outcome
}

type keyTable map[string]*keyState

func (t keyTable) state(key string) *keyState {
	s := t[key]
	if s == nil {
		s = &keyState{}
		t[key] = s
	}
	return s
}

// setAcked records an acknowledged set.
func (t keyTable) setAcked(key string, version uint64) {
	s := t.state(key)
	if version > s.acked {
		s.acked = version
	}
	delete(s.uncertain, version)
}

// setUncertain records a set whose outcome is unknown.
func (t keyTable) setUncertain(key string, version uint64) {
	s := t.state(key)
	if s.uncertain == nil {
		s.uncertain = map[uint64]struct{}{}
	}
	s.uncertain[version] = struct{}{}
}

// checkHit reports whether value is a legitimate reply to a get of key.
func (t keyTable) checkHit(key, value string) error {
	k, v, ok := decodeValue(value)
	if !ok {
		return fmt.Errorf("key %s: value %q does not decode", key, abbrev(value))
	}
	if k != key {
		return fmt.Errorf("key %s: got the value of key %s (version %d)", key, k, v)
	}
	s := t.state(key)
	if v == s.acked && v != 0 {
		return nil
	}
	if _, ok := s.uncertain[v]; ok {
		return nil
	}
	return fmt.Errorf("key %s: got version %d, last acknowledged %d and it was not an unacknowledged set", key, v, s.acked)
}

func abbrev(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// errorCause names a protocol error line for the report: the text after
// "backend failure: " when present, else the line without its argument
// noise.
func errorCause(line string) string {
	if _, after, ok := strings.Cut(line, "backend failure: "); ok {
		return "backend failure: " + strings.TrimSpace(after)
	}
	line = strings.TrimPrefix(line, "-")
	if len(line) > 60 {
		line = line[:60]
	}
	return line
}
