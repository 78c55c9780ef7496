package store

import (
	"encoding/base64"
	"strconv"
)

// Meta limits (memcached's MFLAG_MAX_OPT_LENGTH, MFLAG_MAX_OPAQUE_LENGTH).
const (
	metaMaxTokens = 20
	opaqueMax     = 32
)

const errOpaque = "CLIENT_ERROR opaque token too long"

// metaFlags is a meta command's flags after memcached's preparse.
type metaFlags struct {
	key                               []byte // decoded when b is given
	locked, vivify, value, noUpdate   bool
	setStale, noReply, hasCAS, newTTL bool
	keyBinary, removeValue, hasCASIn  bool
	mode                              byte
	exp, vivifyExp, recache           int64
	clientFlags                       uint32
	reqCAS, casIn, delta, initial     uint64
}

// preparse reads the flags from token start on, as memcached's
// _meta_flag_preparse: a repeated or unknown flag fails at once; a bad
// argument marks the flags failed and parsing goes on, the last error's
// wording winning over errstr. It reports the wording and whether it
// failed.
func (s *Store) preparse(tk *tokens, start int, of *metaFlags, errstr string, now int64) (string, bool) {
	var seen [127]bool
	failed := false
	of.key = tk.t[1]
	for i := start; i < tk.n; i++ {
		tok := tk.t[i]
		o, arg := tok[0], tok[1:]
		if o >= 127 || seen[o] {
			return "CLIENT_ERROR duplicate flag", true
		}
		seen[o] = true
		switch o {
		case 'b':
			of.key = decodeKey(tk.t[1])
			if of.key == nil {
				errstr, failed = "CLIENT_ERROR error decoding key", true
			}
			of.keyBinary = true
		case 'N', 'T', 'R':
			of.locked = true
			v, ok := safeStrtol(arg)
			if !ok {
				errstr, failed = "CLIENT_ERROR bad token in command line format", true
				break
			}
			e := s.realtime(int64(v), now)
			switch o {
			case 'N':
				of.vivify, of.vivifyExp = true, e
			case 'T':
				of.exp, of.newTTL = e, true
			default:
				of.recache = e
			}
		case 'l', 'h':
			of.locked = true
		case 'O', 'P', 'L', 'k', 's', 't', 'c', 'f':
		case 'v':
			of.value = true
		case 'u':
			of.noUpdate = true
		case 'q':
			of.noReply = true
		case 'x':
			of.removeValue = true
		case 'F':
			v, ok := safeStrtoul(arg)
			if !ok {
				failed = true
			}
			of.clientFlags = v
		case 'C', 'E':
			v, ok := safeStrtoull(arg)
			if !ok {
				errstr, failed = "CLIENT_ERROR bad token in command line format", true
			} else if o == 'C' {
				of.reqCAS, of.hasCAS = v, true
			} else {
				of.casIn, of.hasCASIn = v, true
			}
		case 'M':
			if len(tok) != 2 {
				errstr, failed = "CLIENT_ERROR incorrect length for M token", true
			} else {
				of.mode = tok[1]
			}
		case 'J':
			v, ok := safeStrtoull(arg)
			if !ok {
				errstr, failed = "CLIENT_ERROR invalid numeric initial value", true
			}
			of.initial = v
		case 'D':
			v, ok := safeStrtoull(arg)
			if !ok {
				errstr, failed = "CLIENT_ERROR invalid numeric delta value", true
			}
			of.delta = v
		case 'I':
			of.setStale = true
		default:
			return "CLIENT_ERROR invalid flag", true
		}
	}
	return errstr, failed
}

// appendOpaque appends " O..." and reports false when the opaque is too
// long.
func appendOpaque(dst, tok []byte) ([]byte, bool) {
	if len(tok) > opaqueMax {
		return dst, false
	}
	return append(append(dst, ' '), tok...), true
}

// appendTTL appends the seconds left of exp, -1 for none, as memcached's
// unsigned 32-bit difference.
func appendTTL(dst []byte, exp, now int64) []byte {
	if exp == 0 {
		return append(dst, "-1"...)
	}
	return strconv.AppendUint(dst, uint64(uint32(exp-now)), 10)
}

func errLine(dst []byte, line string) []byte {
	return append(append(dst, line...), "\r\n"...)
}

// metaGet answers mg.
func (s *Store) metaGet(dst []byte, tk *tokens) []byte {
	nt := tk.ntokens()
	if nt < 3 {
		return append(dst, replyError...)
	}
	if len(tk.t[1]) > keyMax {
		return errLine(dst, errLineFormat)
	}
	if nt > metaMaxTokens {
		return errLine(dst, "CLIENT_ERROR options flags are too long")
	}
	now := s.now()
	var of metaFlags
	if errstr, failed := s.preparse(tk, 2, &of, errLineFormat, now); failed {
		return errLine(dst, errstr)
	}
	key := string(of.key)
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(key, now)
	if it != nil && !of.locked && !of.noUpdate {
		sh.bump(it, now)
	}
	created := false
	if it == nil && of.vivify && sh.fits(int64(len(key))+ItemOverhead) {
		it = newItem(key, nil, 0, 0)
		s.link(sh, it, nil, 0, now)
		created = true
	}
	if it == nil {
		sh.st.misses++
		return metaMiss(dst, "EN", tk, key, of)
	}
	sh.st.hits++
	mark := len(dst)
	if of.value {
		dst = strconv.AppendInt(append(dst, "VA "...), int64(len(it.value())), 10)
	} else {
		dst = append(dst, "HD"...)
	}
	won := false
	for i := 2; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'T':
			it.exp = of.exp
		case 'N':
			if created {
				it.exp = of.vivifyExp
				won = true
			}
		case 'R':
			if it.bits&itemTokenSent == 0 && !created && it.exp != 0 && it.exp < of.recache {
				won = true
			}
		case 's':
			dst = strconv.AppendInt(append(dst, " s"...), int64(len(it.value())), 10)
		case 't':
			dst = appendTTL(append(dst, " t"...), it.exp, now)
		case 'c':
			dst = strconv.AppendUint(append(dst, " c"...), it.cas, 10)
		case 'f':
			dst = strconv.AppendUint(append(dst, " f"...), uint64(it.flags), 10)
		case 'l':
			dst = strconv.AppendUint(append(dst, " l"...), uint64(uint32(now-it.atime)), 10)
		case 'h':
			dst = append(dst, " h0"...)
			if it.bits&itemFetched != 0 {
				dst[len(dst)-1] = '1'
			}
		case 'O':
			var ok bool
			if dst, ok = appendOpaque(dst, tok); !ok {
				return errLine(dst[:mark], errOpaque)
			}
		case 'k':
			dst = appendKeyFlag(dst, it.key(), it.bits&itemKeyBinary != 0)
		}
	}
	if it.bits&itemTokenSent != 0 {
		dst = append(dst, " Z"...)
	}
	if it.bits&itemStale != 0 {
		dst = append(dst, " X"...)
		if it.bits&itemTokenSent == 0 {
			won = true
		}
	}
	if won {
		dst = append(dst, " W"...)
		it.bits |= itemTokenSent
	}
	dst = append(dst, "\r\n"...)
	if of.value {
		dst = append(append(dst, it.value()...), "\r\n"...)
	}
	if of.locked && !of.noUpdate {
		sh.bump(it, now)
	}
	return dst
}

// metaMiss appends a meta reply without an item: code and the O and k
// flags, hidden by q (a too long opaque is an error, never hidden).
func metaMiss(dst []byte, code string, tk *tokens, key string, of metaFlags) []byte {
	mark := len(dst)
	dst = append(dst, code...)
	for i := 2; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'O':
			var ok bool
			if dst, ok = appendOpaque(dst, tok); !ok {
				return errLine(dst[:mark], errOpaque)
			}
		case 'k':
			dst = appendKeyFlag(dst, key, of.keyBinary)
		}
	}
	if of.noReply {
		return dst[:mark]
	}
	return append(dst, "\r\n"...)
}

// metaSet answers ms.
func (s *Store) metaSet(dst []byte, tk *tokens, data []byte) []byte {
	nt := tk.ntokens()
	switch {
	case nt < 3:
		return append(dst, replyError...)
	case len(tk.t[1]) > keyMax || nt == 3:
		return errLine(dst, errLineFormat)
	case nt > metaMaxTokens:
		return errLine(dst, "CLIENT_ERROR options flags too long")
	}
	vlen, ok := safeStrtol(tk.t[2])
	if !ok || vlen < 0 || vlen > 1<<31-1-2 {
		return errLine(dst, errLineFormat)
	}
	now := s.now()
	var of metaFlags
	errstr, failed := s.preparse(tk, 3, &of, errLineFormat, now)
	if failed {
		return errLine(dst, errstr)
	}
	for i := 3; i < tk.n; i++ {
		if tk.t[i][0] == 'O' && len(tk.t[i]) > opaqueMax {
			errstr, failed = errOpaque, true
		}
	}
	w := write{key: string(of.key), flags: of.clientFlags, exp: of.exp, reqCAS: of.reqCAS,
		binary: of.keyBinary, meta: true}
	if of.hasCASIn {
		w.casIn = of.casIn
	}
	switch of.mode {
	case 0, 'S':
		w.mode = modeSet
	case 'E':
		w.mode = modeAdd
	case 'A':
		w.mode = modeAppend
	case 'P':
		w.mode = modePrepend
	case 'R':
		w.mode = modeReplace
	default:
		return errLine(dst, "CLIENT_ERROR invalid mode for ms M token")
	}
	if of.hasCAS && (w.mode == modeSet || w.mode == modeReplace) {
		w.mode = modeCAS
	}
	if failed {
		return errLine(dst, errstr)
	}
	w.setStale = of.setStale && w.mode == modeCAS
	res, it, fail := s.store(w, data, int(vlen), now)
	if fail != "" {
		return errLine(dst, fail)
	}
	if res == resStored && of.noReply {
		return dst
	}
	dst = append(dst, [...]string{"HD", "EX", "NF", "NS"}[res]...)
	for i := 3; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'O':
			dst = append(append(dst, ' '), tok...)
		case 'k':
			dst = appendKeyFlag(dst, w.key, w.binary)
		case 'c':
			var cas uint64
			if res == resStored {
				cas = it.cas
			}
			dst = strconv.AppendUint(append(dst, " c"...), cas, 10)
		}
	}
	return append(dst, "\r\n"...)
}

// metaOpen checks an md or ma line as memcached does for both and reads
// its flags into of. It returns the time the command runs at, or ok false
// and dst with the error reply appended.
func (s *Store) metaOpen(dst []byte, tk *tokens, of *metaFlags) (now int64, errReply []byte, ok bool) {
	nt := tk.ntokens()
	switch {
	case nt < 3:
		return 0, append(dst, replyError...), false
	case len(tk.t[1]) > keyMax:
		return 0, errLine(dst, errLineFormat), false
	case nt > metaMaxTokens:
		return 0, errLine(dst, "CLIENT_ERROR options flags too long"), false
	}
	now = s.now()
	if _, failed := s.preparse(tk, 2, of, errLineFormat, now); failed {
		return 0, errLine(dst, "CLIENT_ERROR invalid or duplicate flag"), false
	}
	return now, dst, true
}

// metaDelete answers md.
func (s *Store) metaDelete(dst []byte, tk *tokens) []byte {
	var of metaFlags
	now, errReply, ok := s.metaOpen(dst, tk, &of)
	if !ok {
		return errReply
	}
	key := string(of.key)
	var flags []byte
	for i := 2; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'O':
			var ok bool
			if flags, ok = appendOpaque(flags, tok); !ok {
				return errLine(dst, errOpaque)
			}
		case 'k':
			flags = appendKeyFlag(flags, key, of.keyBinary)
		}
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	code := s.deleteLocked(sh, key, &of, now)
	if code == "HD" && of.noReply {
		return dst
	}
	return append(append(append(dst, code...), flags...), "\r\n"...)
}

// deleteLocked applies md to key: remove it, or with x keep an empty item in
// its place, or with I mark it stale.
func (s *Store) deleteLocked(sh *shard, key string, of *metaFlags, now int64) string {
	it := sh.get(key, now)
	if it == nil {
		return "NF"
	}
	if of.hasCAS && it.cas != of.reqCAS {
		return "EX"
	}
	if of.removeValue {
		cas := it.cas
		if of.hasCASIn {
			cas = of.casIn
		}
		tomb := newItem(key, nil, of.clientFlags, of.exp)
		s.link(sh, tomb, it, cas, now)
		it = tomb
	}
	if of.setStale {
		if of.newTTL {
			it.exp = of.exp
		}
		it.bits = it.bits&^itemTokenSent | itemStale
		if of.hasCASIn {
			it.cas = of.casIn
		} else {
			it.cas = s.nextCAS()
		}
	} else if !of.removeValue {
		sh.unlink(it)
	}
	return "HD"
}

// metaArithmetic answers ma.
func (s *Store) metaArithmetic(dst []byte, tk *tokens) []byte {
	of := metaFlags{delta: 1}
	now, errReply, ok := s.metaOpen(dst, tk, &of)
	if !ok {
		return errReply
	}
	incr := true
	switch of.mode {
	case 0, 'I', '+':
	case 'D', '-':
		incr = false
	default:
		return errLine(dst, "CLIENT_ERROR invalid mode for ma M token")
	}
	key := string(of.key)
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it, num, res := s.addDelta(sh, key, incr, of.delta, of.reqCAS, now)
	created := false
	code := ""
	switch res {
	case deltaNonNumeric:
		return errLine(dst, errNonNumeric)
	case deltaNoMemory:
		return errLine(dst, "SERVER_ERROR out of memory")
	case deltaCASMismatch:
		code = "EX"
	case deltaNotFound:
		code = "NF"
		if of.vivify {
			num = strconv.AppendUint(nil, of.initial, 10)
			if !sh.fits(int64(len(key)+len(num)) + ItemOverhead) {
				return errLine(dst, "SERVER_ERROR Out of memory allocating new item")
			}
			it = newItem(key, num, 0, 0)
			s.link(sh, it, nil, of.casIn, now)
			created = true
		}
	}
	if it == nil {
		return metaMiss(dst, code, tk, key, metaFlags{keyBinary: of.keyBinary})
	}
	mark := len(dst)
	if of.value {
		dst = strconv.AppendInt(append(dst, "VA "...), int64(len(num)), 10)
	} else {
		dst = append(dst, "HD"...)
	}
	if of.hasCASIn && !created {
		it.cas = of.casIn
	}
	for i := 2; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'c':
			dst = strconv.AppendUint(append(dst, " c"...), it.cas, 10)
		case 't':
			dst = appendTTL(append(dst, " t"...), it.exp, now)
		case 'T':
			it.exp = of.exp
		case 'N':
			if created {
				it.exp = of.vivifyExp
			}
		case 'O':
			var ok bool
			if dst, ok = appendOpaque(dst, tok); !ok {
				return errLine(dst[:mark], errOpaque)
			}
		case 'k':
			dst = appendKeyFlag(dst, key, of.keyBinary)
		}
	}
	if of.value {
		dst = append(append(dst, "\r\n"...), num...)
	}
	if res == deltaOK && of.noReply {
		return dst[:mark]
	}
	return append(dst, "\r\n"...)
}

// metaDebug answers me with memcached 1.6's fields: exp is the current time
// less the expiry (negative while the item lives), size and cls are those
// of memcached's item layout and default slab classes.
func (s *Store) metaDebug(dst []byte, tk *tokens) []byte {
	if tk.ntokens() < 3 || len(tk.t[1]) > keyMax {
		return errLine(dst, errLineFormat)
	}
	key := tk.t[1]
	if tk.ntokens() >= 4 && string(tk.t[2]) == "b" {
		if key = decodeKey(key); key == nil {
			return errLine(dst, errLineFormat)
		}
	}
	now := s.now()
	sh := s.shardOf(string(key))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(string(key), now)
	if it == nil {
		return append(dst, "EN\r\n"...)
	}
	dst = append(dst, "ME "...)
	if it.bits&itemKeyBinary != 0 {
		dst = base64.StdEncoding.AppendEncode(dst, key)
	} else {
		dst = append(dst, key...)
	}
	dst = append(dst, " exp="...)
	if it.exp == 0 {
		dst = append(dst, "-1"...)
	} else {
		dst = strconv.AppendInt(dst, int64(int32(uint32(now-it.exp))), 10)
	}
	dst = strconv.AppendUint(append(dst, " la="...), uint64(uint32(now-it.atime)), 10)
	dst = strconv.AppendUint(append(dst, " cas="...), it.cas, 10)
	dst = append(dst, " fetch=no"...)
	if it.bits&itemFetched != 0 {
		dst = append(dst[:len(dst)-2], "yes"...)
	}
	total := itemTotal(int(it.nkey), it.flags, len(it.value()))
	dst = strconv.AppendInt(append(dst, " cls="...), int64(slabClass(total)), 10)
	dst = strconv.AppendInt(append(dst, " size="...), total, 10)
	return append(dst, "\r\n"...)
}

// slabClass is the class memcached 1.6's default slabs (-n 48, -f 1.25,
// 512 KiB largest chunk) give an item of total bytes.
func slabClass(total int64) int {
	size, id := int64(96), 1
	for float64(size) <= chunkMax/1.25 {
		if total <= size {
			return id
		}
		id++
		size = int64(float64(size) * 1.25)
		if size%8 != 0 {
			size += 8 - size%8
		}
	}
	return id
}
