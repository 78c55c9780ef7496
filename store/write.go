package store

import "strconv"

// Results of a write (memcached's store_item_type).
const (
	resStored = iota
	resExists
	resNotFound
	resNotStored
)

// write is one storage request after parsing.
type write struct {
	key      string
	flags    uint32
	exp      int64
	mode     int
	reqCAS   uint64 // the CAS the client asks to match; 0 for none
	setStale bool   // ms I: a CAS older than the item's stores it as stale
	binary   bool   // the key came base64-encoded (ms b)
	casIn    uint64 // ms E: the CAS to give the new item; 0 for a fresh one
	meta     bool   // ms: a refused item removes the old one in every mode
}

// chunkMax is memcached's slab_chunk_size_max (half its 1 MiB page): an
// item larger than this is stored in chunks, and incr/decr call it
// non-numeric whatever it holds.
const chunkMax = 512 << 10

// store checks and links a write whose value is the vlen bytes at the
// front of data, which must be followed by "\r\n". It answers as memcached
// does: the size checks first (a refused set removes the old item), then
// the data block, then the storage rules. fail is the wire error, if any.
// cas is the stored item's CAS, read while its shard is locked (another
// request may give the item a new one as soon as it is unlocked: md I);
// 0 unless res is resStored.
func (s *Store) store(w write, data []byte, vlen int, now int64) (res int, cas uint64, fail string) {
	sh := s.shardOf(w.key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case !s.sizeOK(len(w.key), w.flags, vlen):
		sh.st.tooLarge++
		fail = errTooLarge
	case !sh.fits(int64(len(w.key)+vlen) + ItemOverhead):
		sh.st.noMemory++
		fail = errNoMemory
	}
	if fail != "" {
		if w.mode == modeSet || w.meta {
			if old := sh.get(w.key, now); old != nil {
				sh.unlink(old)
			}
		}
		return 0, 0, fail
	}
	if len(data) < vlen+2 || data[vlen] != '\r' || data[vlen+1] != '\n' {
		return 0, 0, errBadChunk
	}
	it := newItem(w.key, data[:vlen], w.flags, w.exp)
	if w.binary {
		it.bits |= itemKeyBinary
	}
	res, it = s.storeItem(sh, it, w, now)
	if res == resStored {
		cas = it.cas
	}
	return res, cas, ""
}

// storeItem applies memcached's storage rules (do_store_item) to the new
// item it; the shard is locked. It returns the result and the linked item.
func (s *Store) storeItem(sh *shard, it *item, w write, now int64) (int, *item) {
	old := sh.get(w.key, now)
	if old == nil {
		return s.storeNew(sh, it, w, now)
	}
	casRes := compareCAS(w, old)
	switch w.mode {
	case modeAdd:
		// add keeps the old item but counts as a use of it
		old.atime = now
		sh.toFront(old)
		return resNotStored, nil
	case modeCAS:
		switch casRes {
		case casMatch:
		case casStale:
			it.exp = old.exp
			it.bits |= itemStale | old.bits&itemTokenSent
		default:
			return resExists, nil
		}
	case modeAppend, modePrepend:
		if casRes != casNone && casRes != casMatch {
			return resExists, nil
		}
		if it = s.concat(sh, it, old, w); it == nil {
			return resNotStored, nil
		}
	}
	s.link(sh, it, old, w.casIn, now)
	return resStored, it
}

// storeNew applies the storage rules to the new item it where the key
// has none: add and set store it, the other modes do not.
func (s *Store) storeNew(sh *shard, it *item, w write, now int64) (int, *item) {
	switch w.mode {
	case modeAdd, modeSet:
		s.link(sh, it, nil, w.casIn, now)
		return resStored, it
	case modeCAS:
		return resNotFound, nil
	}
	return resNotStored, nil
}

// How a write's CAS compares with the item it replaces (compareCAS).
const (
	casNone  = iota // the write names none
	casMatch        // the item's
	casStale        // older than the item's, and ms I takes that as stale
	casBad          // any other
)

// compareCAS compares the CAS the write names with old's.
func compareCAS(w write, old *item) int {
	switch {
	case w.reqCAS == 0:
		return casNone
	case w.reqCAS == old.cas:
		return casMatch
	case w.setStale && w.reqCAS < old.cas:
		return casStale
	}
	return casBad
}

// concat returns the item append or prepend makes of old and the new
// item it, or nil when it would be too large or does not fit.
func (s *Store) concat(sh *shard, it, old *item, w write) *item {
	n := len(old.value()) + len(it.value())
	if itemTotal(len(w.key), old.flags, n) > int64(s.cfg.ItemSizeMax) ||
		!sh.fits(int64(len(w.key)+n)+ItemOverhead) {
		return nil
	}
	v := make([]byte, 0, n)
	if w.mode == modeAppend {
		v = append(append(v, old.value()...), it.value()...)
	} else {
		v = append(append(v, it.value()...), old.value()...)
	}
	return newItem(w.key, v, old.flags, old.exp)
}

// Results of incr, decr and ma.
const (
	deltaOK = iota
	deltaNotFound
	deltaNonNumeric
	deltaCASMismatch
	deltaNoMemory
)

// addDelta is memcached's do_add_delta: it adds delta to (or takes it from,
// stopping at zero) key's decimal value, wrapping at 2^64. A result no
// longer than the old value replaces it in place, padded with spaces to the
// old length, keeping the item's marks; a longer one makes a new item. Both
// get a new CAS. The shard is locked; it returns the item and the number.
func (s *Store) addDelta(sh *shard, key string, incr bool, delta, reqCAS uint64, now int64) (*item, []byte, int) {
	it := sh.get(key, now)
	if it == nil {
		return nil, nil, deltaNotFound
	}
	v := it.value()
	if len(v) == 0 || itemTotal(len(key), it.flags, len(v)) > chunkMax {
		return nil, nil, deltaNonNumeric
	}
	if reqCAS != 0 && it.cas != reqCAS {
		return nil, nil, deltaCASMismatch
	}
	n, ok := safeStrtoull(v)
	if !ok {
		return nil, nil, deltaNonNumeric
	}
	switch {
	case incr:
		n += delta
	case delta > n:
		n = 0
	default:
		n -= delta
	}
	var numBuf [20]byte
	num := strconv.AppendUint(numBuf[:0], n, 10)
	if len(num) <= len(v) {
		buf := make([]byte, len(it.buf))
		copy(buf, key)
		copy(buf[len(key):], num)
		for i := len(key) + len(num); i < len(buf); i++ {
			buf[i] = ' '
		}
		it.buf = buf
		sh.m[it.key()] = it // the index's key now shares the new buffer
		it.cas = s.nextCAS()
		it.atime = now
		sh.toFront(it)
		return it, num, deltaOK
	}
	if !s.sizeOK(len(key), it.flags, len(num)) || !sh.fits(int64(len(key)+len(num))+ItemOverhead) {
		return nil, nil, deltaNoMemory
	}
	nit := newItem(key, num, it.flags, it.exp)
	s.link(sh, nit, it, 0, now)
	// memcached answers from the old, now unlinked item given the new
	// CAS, so an ma T after a growing increment changes nothing.
	it.cas = nit.cas
	return it, num, deltaOK
}
