package sharding

// crc16Table is the table of CRC-16/XMODEM (polynomial 0x1021, MSB first).
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

// hashCRC16 is twemproxy's "crc16": table CRC-16/XMODEM with init 0, but the
// register is a uint32 that is never masked, so the bits shifted out above
// bit 15 accumulate. Its low 16 bits are CRC-16/XMODEM; distributions see all
// 32. It is therefore not the Redis Cluster slot function.
func hashCRC16(key []byte) uint32 {
	var crc uint32
	for _, b := range key {
		crc = crc<<8 ^ uint32(crc16Table[byte(crc>>8)^b])
	}
	return crc
}

// CRC16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection): the low 16 bits of twemproxy's crc16, and the hash of a Redis
// Cluster slot (package cluster masks it to 14 bits).
func CRC16(key []byte) uint16 {
	var crc uint16
	for _, b := range key {
		crc = crc<<8 ^ crc16Table[byte(crc>>8)^b]
	}
	return crc
}
