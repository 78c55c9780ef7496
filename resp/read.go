package resp

// ReadInt reads the integer reply at the start of raw (":<n>\r\n"); ok is
// false for any other reply. A router that inspects a server's reply (a
// route pool's PTTL) reads it with this.
func ReadInt(raw []byte) (n int64, ok bool) { return readInt(raw) }

// ReadString reads the string reply at the start of raw: a bulk string,
// or in RESP3 a verbatim string (its data after the "txt:" format). null
// reports a null ("$-1" or "_"); ok is false for any other reply. data is
// a slice of raw.
func ReadString(raw []byte) (data []byte, null, ok bool) { return readString(raw) }

// ReadElements reads the array reply at the start of raw: its elements,
// each whole, slices of raw; ok is false for any other reply (a null
// array, an error). The proxy reads an EXEC's replies with this.
func ReadElements(raw []byte) (elems [][]byte, ok bool) { return readElements(raw) }
