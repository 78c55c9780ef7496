// Package mcbase64 decodes memcached's base64 keys, the meta protocol's
// "b" flag, as memcached 1.6 does, so that the proxy routes on, and its
// store keeps, the bytes memcached would store. memcached's decoder is
// lenient where encoding/base64 is strict: bytes outside the standard
// alphabet are skipped, and decoding stops after the first block of four
// that holds padding, whatever follows it.
//
// It is the one decoder of both memcache (routing) and store (the proxy's
// own cache), which must agree on every key. It imports only the standard
// library. Its functions keep no state and are safe for many goroutines.
package mcbase64
