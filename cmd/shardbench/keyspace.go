package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
)

// headerLen is the length of a value's header: the key's index and the
// value's version, eight lower-case hex digits each ("0000002a00000003").
const headerLen = 16

// padSlack is how far into the shared padding a value's body may start; the
// start depends on (key, version), so two versions of a key differ in body
// as well as in header.
const padSlack = 256

// keyspace owns the key names and the values the generator writes, and
// checks every value a server returns.
//
// The value of key k at version v is a pure function of (k, v): a header
// naming k and v, then a slice of a fixed pseudo-random padding whose start
// depends on k and v. A returned value is right when its length is the
// configured size, its header names the key that was asked for and a version
// the generator has issued for that key, and its body is that version's body.
// Versions are issued per key from 1, by an atomic counter incremented
// before the set is sent, so a set in flight is already a valid answer.
//
// A keyspace is safe for concurrent use; names and pad are read-only after
// newKeyspace.
type keyspace struct {
	prefix string
	width  int      // digits of a key's index in its name
	names  [][]byte // names[k] is key k's name: prefix + zero-padded k
	size   int      // value size in bytes, >= headerLen
	pad    []byte   // size - headerLen + padSlack printable bytes

	issued []atomic.Uint32 // latest version handed out per key; 0 = none
	acked  []atomic.Bool   // a set of the key has been acknowledged
}

// newKeyspace returns n keys named prefix + index, with values of size bytes.
func newKeyspace(prefix string, n, size int) *keyspace {
	width := len(strconv.Itoa(n - 1))
	ks := &keyspace{
		prefix: prefix,
		width:  width,
		names:  make([][]byte, n),
		size:   size,
		issued: make([]atomic.Uint32, n),
		acked:  make([]atomic.Bool, n),
	}
	arena := make([]byte, 0, n*(len(prefix)+width))
	for k := range n {
		start := len(arena)
		arena = append(arena, prefix...)
		arena = appendPadded(arena, k, width)
		ks.names[k] = arena[start:len(arena):len(arena)]
	}
	// A fixed seed: the padding is part of the value's definition.
	rng := rand.New(rand.NewPCG(0x5eed, 0xda7a))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	ks.pad = make([]byte, size-headerLen+padSlack)
	for i := range ks.pad {
		ks.pad[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return ks
}

// appendPadded appends k in decimal, zero-padded to width digits.
func appendPadded(dst []byte, k, width int) []byte {
	var digits [20]byte
	s := strconv.AppendInt(digits[:0], int64(k), 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// len returns the number of keys.
func (ks *keyspace) len() int { return len(ks.names) }

// index returns the key whose name is name, or false when name is not one
// of the keyspace's names.
func (ks *keyspace) index(name []byte) (int, bool) {
	digits, ok := bytes.CutPrefix(name, []byte(ks.prefix))
	if !ok || len(digits) != ks.width {
		return 0, false
	}
	k := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		k = k*10 + int(c-'0')
	}
	return k, k < len(ks.names)
}

// nextVersion issues the next version of key k.
func (ks *keyspace) nextVersion(k int) uint32 { return ks.issued[k].Add(1) }

// ack records that a set of key k was acknowledged: from now on a miss of k
// is a wrong reply.
func (ks *keyspace) ack(k int) { ks.acked[k].Store(true) }

// isAcked reports whether a set of key k has been acknowledged.
func (ks *keyspace) isAcked(k int) bool { return ks.acked[k].Load() }

// body returns the part of version ver of key k after the header.
func (ks *keyspace) body(k int, ver uint32) []byte {
	off := int((uint32(k)*2654435761 ^ ver*40503) % padSlack)
	return ks.pad[off : off+ks.size-headerLen]
}

// appendValue appends version ver of key k's value.
func (ks *keyspace) appendValue(dst []byte, k int, ver uint32) []byte {
	dst = appendHex32(dst, uint32(k))
	dst = appendHex32(dst, ver)
	return append(dst, ks.body(k, ver)...)
}

// check returns nil when v is a value the generator wrote for key k, and
// otherwise an error saying what is wrong with it.
func (ks *keyspace) check(k int, v []byte) error {
	name := ks.names[k]
	if len(v) != ks.size {
		return fmt.Errorf("key %s: value of %d bytes, want %d", name, len(v), ks.size)
	}
	owner, ok1 := parseHex32(v[0:8])
	ver, ok2 := parseHex32(v[8:16])
	if !ok1 || !ok2 {
		return fmt.Errorf("key %s: value %q is not one the generator writes", name, abbrev(v))
	}
	if int(owner) != k {
		if int(owner) < ks.len() {
			return fmt.Errorf("key %s: got the value of key %s", name, ks.names[owner])
		}
		return fmt.Errorf("key %s: got a value of key index %d, outside the key space", name, owner)
	}
	if latest := ks.issued[k].Load(); ver == 0 || ver > latest {
		return fmt.Errorf("key %s: version %d was never written (latest %d; "+
			"a value left by another run? use a fresh -prefix)", name, ver, latest)
	}
	if want := ks.body(k, ver); !bytes.Equal(v[headerLen:], want) {
		i := 0
		for i < len(want) && v[headerLen+i] == want[i] {
			i++
		}
		return fmt.Errorf("key %s: version %d differs at byte %d", name, ver, headerLen+i)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendHex32 appends x as eight lower-case hex digits.
func appendHex32(dst []byte, x uint32) []byte {
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hexDigits[(x>>uint(shift))&0xf])
	}
	return dst
}

// parseHex32 parses eight lower-case hex digits.
func parseHex32(b []byte) (uint32, bool) {
	var x uint32
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			x = x<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			x = x<<4 | uint32(c-'a'+10)
		default:
			return 0, false
		}
	}
	return x, true
}

// abbrev shortens b for an error message.
func abbrev(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
