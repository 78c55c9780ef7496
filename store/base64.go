package store

import "encoding/base64"

const b64Invalid = 0x80

// b64Value maps a byte to its value in the standard alphabet, '=' to 0 and
// every other byte to b64Invalid.
var b64Value = func() (t [256]byte) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for i := range t {
		t[i] = b64Invalid
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	t['='] = 0
	return t
}()

// decodeKey decodes a meta command's base64 key (flag b) as memcached does:
// bytes outside the alphabet are skipped, the others (with '=') must make
// whole blocks of four, decoding ends with the first block that has
// padding, and more than two '=' in it fail. An empty result means the key
// does not decode.
func decodeKey(src []byte) []byte {
	count := 0
	for _, c := range src {
		if b64Value[c] != b64Invalid {
			count++
		}
	}
	if count == 0 || count%4 != 0 {
		return nil
	}
	dst := make([]byte, 0, count/4*3)
	var block [4]byte
	n, pad := 0, 0
	for _, c := range src {
		v := b64Value[c]
		if v == b64Invalid {
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
		dst = append(dst, block[0]<<2|block[1]>>4, block[1]<<4|block[2]>>2, block[2]<<6|block[3])
		n = 0
		if pad > 0 {
			if pad > 2 {
				return nil
			}
			return dst[:len(dst)-pad]
		}
	}
	return dst
}

// appendKeyFlag appends a meta reply's " k<key>", base64 with " b" after
// it when the key is binary.
func appendKeyFlag(dst []byte, key string, binary bool) []byte {
	dst = append(dst, " k"...)
	if !binary {
		return append(dst, key...)
	}
	dst = base64.StdEncoding.AppendEncode(dst, []byte(key))
	return append(dst, " b"...)
}
