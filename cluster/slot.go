package cluster

import (
	"bytes"

	"shardproxy/sharding"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Slot returns the hash slot of key as Redis Cluster computes it
// (keyHashSlot in cluster.c): CRC16/XMODEM (polynomial 0x1021, initial value
// 0, no reflection) of the key, modulo 16384. When the key holds a '{' and,
// after it, a '}', and there is at least one byte between them, only those
// bytes are hashed (the hash tag): "{user1000}.following" hashes
// "user1000". An empty tag ("foo{}{bar}") hashes the whole key.
func Slot(key []byte) int {
	if open := bytes.IndexByte(key, '{'); open >= 0 {
		if end := bytes.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(sharding.CRC16(key) & (Slots - 1))
}
