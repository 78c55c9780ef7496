package store

import "encoding/base64"

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
