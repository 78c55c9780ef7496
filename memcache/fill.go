package memcache

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// A fill copies an item from one memcached to another with what makes it
// the same item: its value, its client flags and its remaining TTL. The
// fetch is "mg <key> v f t" (the t flag reports the seconds left, -1 for
// none) and the fill is "ms <key> <bytes> T<ttl> F<flags> ME", mode add,
// so that a fill never replaces a value a client wrote meanwhile.

// errFetchReply is a reply to a fetch that does not read as one.
var errFetchReply = errors.New("memcache: bad reply to mg v f t")

// maxRelativeTTL is the largest exptime memcached reads as seconds from
// now; a larger one is a Unix time.
const maxRelativeTTL = 30 * 24 * 3600

// AppendFetch appends the meta get that reads key's value, client flags
// and remaining TTL: "mg <key> v f t\r\n". key must be a text key (no
// spaces or control bytes).
func AppendFetch(dst, key []byte) []byte {
	dst = append(dst, "mg "...)
	dst = append(dst, key...)
	return append(dst, " v f t\r\n"...)
}

// Fetched is an item a fetch read.
type Fetched struct {
	Value []byte // a slice of the reply
	Flags uint32
	// TTL is the seconds left, -1 for an item that does not expire.
	TTL int64
}

// ParseFetch reads the reply to AppendFetch's request: a hit ("VA <bytes>
// f<flags> t<ttl>\r\n<data>\r\n", flags in any order) or a miss ("EN\r\n",
// hit false). Anything else is an error: an error line, a reply cut
// short or with bytes after it, a hit without f or t.
func ParseFetch(reply []byte) (it Fetched, hit bool, err error) {
	line, next, err := readLine(reply, 0)
	if err != nil {
		return it, false, errFetchReply
	}
	if string(line) == "EN" && next == len(reply) {
		return it, false, nil
	}
	toks := bytes.Fields(line)
	if len(toks) < 2 || string(toks[0]) != "VA" {
		return it, false, errFetchReply
	}
	size, ok := parseDecimal(toks[1], uint64(len(reply)))
	if !ok || uint64(len(reply)-next) != size+2 || string(reply[len(reply)-2:]) != "\r\n" {
		return it, false, errFetchReply
	}
	var gotF, gotT bool
	for _, t := range toks[2:] {
		switch t[0] {
		case 'f':
			f, ok := parseDecimal(t[1:], 1<<32-1)
			if !ok {
				return it, false, errFetchReply
			}
			it.Flags, gotF = uint32(f), true
		case 't':
			n, ok := parseLong(t[1:])
			if !ok || n < -1 {
				return it, false, errFetchReply
			}
			it.TTL, gotT = n, true
		}
	}
	if !gotF || !gotT {
		return it, false, errFetchReply
	}
	end := next + int(size)
	it.Value = reply[next:end:end]
	return it, true, nil
}

// AppendFill appends the meta set that adds it under key, for as long as
// it has left: "ms <key> <bytes> T<ttl> F<flags> ME\r\n<data>\r\n". A TTL
// past memcached's 30 days of relative time is written as the Unix time
// it ends at, now + TTL, as memcached reads it; -1 is T0, no expiry.
func AppendFill(dst, key []byte, it Fetched, now time.Time) []byte {
	ttl := it.TTL
	switch {
	case ttl < 0:
		ttl = 0
	case ttl > maxRelativeTTL:
		ttl += now.Unix()
	}
	dst = append(dst, "ms "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(it.Value)), 10)
	dst = append(dst, " T"...)
	dst = strconv.AppendInt(dst, ttl, 10)
	dst = append(dst, " F"...)
	dst = strconv.AppendUint(dst, uint64(it.Flags), 10)
	dst = append(dst, " ME\r\n"...)
	dst = append(dst, it.Value...)
	return append(dst, "\r\n"...)
}

// TextKey reports whether key may be written as it is on a text or meta
// command line: no space, no control byte, not empty.
func TextKey(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	for _, c := range key {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
