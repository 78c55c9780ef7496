package mcbase64

import "slices"

// invalid marks, in value, a byte outside the alphabet.
const invalid = 0x80

// value maps a byte to its value in the standard base64 alphabet, '=' to
// 0, and every other byte to invalid.
var value = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		t[i] = invalid
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	t['='] = 0
	return t
}()

// Decode decodes src into dst as memcached 1.6 decodes a base64 key:
// bytes outside the alphabet are skipped, the alphabet bytes (counting
// '=') must be a non-zero multiple of four, decoding stops after the first
// block of four that holds padding, and a block with more than two '='
// fails. dst must hold len(src)/4*3 bytes. It returns the decoded length;
// zero means the key does not decode (memcached: "error decoding key").
// Decode does not allocate.
func Decode(dst, src []byte) int {
	if decodedBound(src) == 0 {
		return 0
	}
	return decodeBlocks(dst, src)
}

// AppendDecode appends to dst what Decode decodes of src and reports
// whether src decodes; when it does not, it returns dst unchanged and
// false. It grows dst at most once, by the decoded length's bound
// (AppendDecode(nil, src) makes one allocation), so that a caller that
// keeps the key gets a slice of its own.
func AppendDecode(dst, src []byte) ([]byte, bool) {
	m := decodedBound(src)
	if m == 0 {
		return dst, false
	}
	out := slices.Grow(dst, m)
	k := decodeBlocks(out[len(out):len(out)+m], src)
	if k == 0 {
		return dst, false
	}
	return out[:len(out)+k], true
}

// decodedBound is the room src's blocks decode into, three bytes a block
// of four alphabet bytes ('=' counted), or 0 when those bytes are none or
// no whole number of blocks: src does not decode.
func decodedBound(src []byte) int {
	n := 0
	for _, c := range src {
		if value[c] != invalid {
			n++
		}
	}
	if n%4 != 0 {
		return 0
	}
	return n / 4 * 3
}

// decodeBlocks decodes the blocks of src's alphabet bytes, whose count
// the caller has checked is a non-zero multiple of four, into dst, which
// holds three bytes a block. It returns the decoded length, zero when the
// first padded block has more than two '='.
func decodeBlocks(dst, src []byte) int {
	var block [4]byte
	n, pos, pad := 0, 0, 0
	for _, c := range src {
		v := value[c]
		if v == invalid {
			continue
		}
		if c == '=' {
			pad++
		}
		block[n] = v
		n++
		if n < 4 {
			continue
		}
		dst[pos] = block[0]<<2 | block[1]>>4
		dst[pos+1] = block[1]<<4 | block[2]>>2
		dst[pos+2] = block[2]<<6 | block[3]
		pos += 3
		n = 0
		if pad > 0 {
			if pad > 2 {
				return 0
			}
			return pos - pad
		}
	}
	return pos
}
