package cluster

import "bytes"

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
	return int(crc16(key) & (Slots - 1))
}

// crc16 is CRC16/XMODEM, table driven.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^c]
	}
	return crc
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
