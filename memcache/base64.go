package memcache

// base64Value maps a byte to its value in the standard base64 alphabet,
// '=' to 0, and every other byte to invalidB64.
var base64Value = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		t[i] = invalidB64
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	t['='] = 0
	return t
}()

const invalidB64 = 0x80

// decodeBase64 decodes a meta command's base64 key ("b" flag) the way
// memcached 1.6 does, so the proxy routes on the same bytes the server
// stores: bytes outside the alphabet are skipped, the alphabet bytes
// (counting '=') must be a non-zero multiple of four, decoding stops after
// the first block that holds padding, and a block with more than two '='
// fails. dst must hold len(src)/4*3 bytes. It returns the decoded length;
// zero means the key does not decode (memcached: "error decoding key").
func decodeBase64(dst, src []byte) int {
	count := 0
	for _, c := range src {
		if base64Value[c] != invalidB64 {
			count++
		}
	}
	if count == 0 || count%4 != 0 {
		return 0
	}
	var block [4]byte
	n, pos, pad := 0, 0, 0
	for _, c := range src {
		v := base64Value[c]
		if v == invalidB64 {
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
