package spool

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Record ops.
const (
	// OpDelete is a key to delete from a server.
	OpDelete byte = 1
	// OpDone says a server's first n pending keys were replayed.
	OpDone byte = 2
)

// Magic opens every spool file.
const Magic = "SPDEL01\n"

// MaxBody bounds a record's body: an op, a server name of at most 255
// bytes and a key (memcached's keys are at most 250 bytes; 64 KiB leaves
// room for any protocol's).
const MaxBody = 64 << 10

// headerLen is a record's length and checksum.
const headerLen = 8

// castagnoli is CRC32C's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors of ReadRecord.
var (
	// ErrShort: the bytes end inside the record.
	ErrShort = errors.New("spool: record cut short")
	// ErrLength: the record's length is 0 or past MaxBody.
	ErrLength = errors.New("spool: bad record length")
	// ErrChecksum: the body does not match its checksum.
	ErrChecksum = errors.New("spool: bad record checksum")
	// ErrBody: the body checks but does not parse (unknown op, a server
	// longer than the body, a done count of the wrong size).
	ErrBody = errors.New("spool: bad record body")
)

// Record is one entry of the file.
type Record struct {
	Op     byte
	Server string
	Key    []byte // OpDelete
	Count  uint32 // OpDone
}

// AppendRecord appends r's encoding to dst. A server name longer than 255
// bytes or a body past MaxBody is the caller's mistake; Spool never
// writes one (Append refuses it).
func AppendRecord(dst []byte, r Record) []byte {
	body := 2 + len(r.Server)
	if r.Op == OpDone {
		body += 4
	} else {
		body += len(r.Key)
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(body))
	dst = append(dst, 0, 0, 0, 0) // checksum, below
	dst = append(dst, r.Op, byte(len(r.Server)))
	dst = append(dst, r.Server...)
	if r.Op == OpDone {
		dst = binary.LittleEndian.AppendUint32(dst, r.Count)
	} else {
		dst = append(dst, r.Key...)
	}
	sum := crc32.Checksum(dst[start+headerLen:], castagnoli)
	binary.LittleEndian.PutUint32(dst[start+4:], sum)
	return dst
}

// ReadRecord decodes the record at the start of b and returns it and its
// length. Key aliases b. A fuzzed parser: it never panics, and every
// strict prefix of a valid record is ErrShort.
func ReadRecord(b []byte) (Record, int, error) {
	if len(b) < headerLen {
		return Record{}, 0, ErrShort
	}
	n := binary.LittleEndian.Uint32(b)
	if n < 2 || n > MaxBody {
		return Record{}, 0, ErrLength
	}
	end := headerLen + int(n)
	if len(b) < end {
		return Record{}, 0, ErrShort
	}
	body := b[headerLen:end]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[4:]) {
		return Record{}, 0, ErrChecksum
	}
	r := Record{Op: body[0]}
	sl := int(body[1])
	rest := body[2:]
	if sl > len(rest) {
		return Record{}, 0, ErrBody
	}
	r.Server, rest = string(rest[:sl]), rest[sl:]
	switch r.Op {
	case OpDelete:
		if len(rest) == 0 {
			return Record{}, 0, ErrBody
		}
		r.Key = rest
	case OpDone:
		if len(rest) != 4 {
			return Record{}, 0, ErrBody
		}
		r.Count = binary.LittleEndian.Uint32(rest)
	default:
		return Record{}, 0, ErrBody
	}
	return r, end, nil
}
