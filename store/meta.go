package store

import (
	"encoding/base64"
	"strconv"

	"shardproxy/internal/mcbase64"
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
		o := tok[0]
		if o >= 127 || seen[o] {
			return "CLIENT_ERROR duplicate flag", true
		}
		seen[o] = true
		var msg string
		bad := false
		switch o {
		case 'b':
			msg, bad = of.binaryKey(tk.t[1])
		case 'N', 'T', 'R':
			msg, bad = s.timeFlag(of, o, tok[1:], now)
		case 'F', 'C', 'E', 'M', 'J', 'D':
			msg, bad = of.numberFlag(tok)
		default:
			if !of.plainFlag(o) {
				return "CLIENT_ERROR invalid flag", true
			}
		}
		if bad {
			failed = true
			if msg != "" {
				errstr = msg
			}
		}
	}
	return errstr, failed
}

// The flag families of preparse. Each reads one flag into of and, when
// its argument is bad, reports so with the error's wording ("" to keep
// the wording of an earlier error).

// binaryKey reads b: the key is base64.
func (of *metaFlags) binaryKey(key []byte) (string, bool) {
	of.keyBinary = true
	var ok bool
	if of.key, ok = mcbase64.AppendDecode(nil, key); !ok {
		return "CLIENT_ERROR error decoding key", true
	}
	return "", false
}

// timeFlag reads N (vivify), T (new TTL) and R (recache), whose argument
// is a time in seconds; each takes the item as locked.
func (s *Store) timeFlag(of *metaFlags, o byte, arg []byte, now int64) (string, bool) {
	of.locked = true
	v, ok := safeStrtol(arg)
	if !ok {
		return "CLIENT_ERROR bad token in command line format", true
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
	return "", false
}

// numberFlag reads the flags with a numeric or one-byte argument: F
// (client flags), C (compare CAS), E (CAS to set), M (mode), J (initial
// value) and D (delta).
func (of *metaFlags) numberFlag(tok []byte) (string, bool) {
	arg := tok[1:]
	switch tok[0] {
	case 'F':
		v, ok := safeStrtoul(arg)
		of.clientFlags = v
		return "", !ok // memcached keeps the wording of an earlier error
	case 'C', 'E':
		v, ok := safeStrtoull(arg)
		if !ok {
			return "CLIENT_ERROR bad token in command line format", true
		}
		if tok[0] == 'C' {
			of.reqCAS, of.hasCAS = v, true
		} else {
			of.casIn, of.hasCASIn = v, true
		}
	case 'M':
		if len(tok) != 2 {
			return "CLIENT_ERROR incorrect length for M token", true
		}
		of.mode = tok[1]
	case 'J':
		v, ok := safeStrtoull(arg)
		of.initial = v
		if !ok {
			return "CLIENT_ERROR invalid numeric initial value", true
		}
	case 'D':
		v, ok := safeStrtoull(arg)
		of.delta = v
		if !ok {
			return "CLIENT_ERROR invalid numeric delta value", true
		}
	}
	return "", false
}

// plainFlag reads a flag without an argument, or one whose argument only
// the reply uses; false for a flag memcached does not know.
func (of *metaFlags) plainFlag(o byte) bool {
	switch o {
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
	case 'I':
		of.setStale = true
	default:
		return false
	}
	return true
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
	switch {
	case nt < 3:
		return append(dst, replyError...)
	case len(tk.t[1]) > keyMax:
		return errLine(dst, errLineFormat)
	case nt > metaMaxTokens:
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
	it, created := s.getOrVivify(sh, key, &of, now)
	if it == nil {
		sh.st.misses++
		return metaMiss(dst, "EN", tk, key, of)
	}
	sh.st.hits++
	dst, ok := appendHit(dst, tk, it, &of, created, now)
	if ok && of.locked && !of.noUpdate {
		sh.bump(it, now)
	}
	return dst
}

// getOrVivify looks key up for mg, a hit counting as a use unless the
// flags say otherwise; with N, a miss creates an empty item (created).
// The shard is locked.
func (s *Store) getOrVivify(sh *shard, key string, of *metaFlags, now int64) (it *item, created bool) {
	it = sh.get(key, now)
	if it != nil && !of.locked && !of.noUpdate {
		sh.bump(it, now)
	}
	if it == nil && of.vivify && sh.fits(int64(len(key))+ItemOverhead) {
		it = newItem(key, nil, 0, 0)
		s.link(sh, it, nil, 0, now)
		created = true
	}
	return it, created
}

// appendHit appends mg's reply for the item it: VA or HD, the flags in
// their order, the Z, X and W marks, and the value when asked for. Not
// ok, it appends the error of a too long opaque instead.
func appendHit(dst []byte, tk *tokens, it *item, of *metaFlags, created bool, now int64) ([]byte, bool) {
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
		case 'T', 'N', 'R':
			won = applyTimeFlag(tok[0], it, of, created) || won
		case 'O':
			var ok bool
			if dst, ok = appendOpaque(dst, tok); !ok {
				return errLine(dst[:mark], errOpaque), false
			}
		default:
			dst = appendItemFlag(dst, tok[0], it, now)
		}
	}
	dst = appendMarks(dst, it, won)
	dst = append(dst, "\r\n"...)
	if of.value {
		dst = append(append(dst, it.value()...), "\r\n"...)
	}
	return dst, true
}

// applyTimeFlag applies mg's T (new TTL), N (vivify) and R (recache) to
// the item, and reports whether the client wins the token to refill it.
func applyTimeFlag(o byte, it *item, of *metaFlags, created bool) (won bool) {
	switch o {
	case 'T':
		it.exp = of.exp
	case 'N':
		if created {
			it.exp = of.vivifyExp
			won = true
		}
	case 'R':
		won = it.bits&itemTokenSent == 0 && !created && it.exp != 0 && it.exp < of.recache
	}
	return won
}

// appendItemFlag appends what mg's flag o returns of the item: s (size),
// t (TTL), c (CAS), f (client flags), l (seconds since last access), h
// (fetched before) or k (key); nothing for another flag.
func appendItemFlag(dst []byte, o byte, it *item, now int64) []byte {
	switch o {
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
	case 'k':
		dst = appendKeyFlag(dst, it.key(), it.bits&itemKeyBinary != 0)
	}
	return dst
}

// appendMarks appends Z (a token was sent), X (stale) and W (this
// client wins the token, which a stale item without one hands out).
func appendMarks(dst []byte, it *item, won bool) []byte {
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
	vlen, errReply := metaSetLine(tk)
	if errReply != "" {
		return append(dst, errReply...)
	}
	now := s.now()
	var of metaFlags
	errstr, failed := s.preparse(tk, 3, &of, errLineFormat, now)
	if failed {
		return errLine(dst, errstr)
	}
	if opaqueTooLong(tk, 3) {
		errstr, failed = errOpaque, true
	}
	w := write{key: string(of.key), flags: of.clientFlags, exp: of.exp, reqCAS: of.reqCAS,
		binary: of.keyBinary, meta: true, casIn: of.casIn} // casIn: 0 without E
	var ok bool
	if w.mode, ok = setMode(of.mode, of.hasCAS); !ok {
		return errLine(dst, "CLIENT_ERROR invalid mode for ms M token")
	}
	if failed {
		return errLine(dst, errstr)
	}
	w.setStale = of.setStale && w.mode == modeCAS
	res, cas, fail := s.store(w, data, vlen, now)
	if fail != "" {
		return errLine(dst, fail)
	}
	if res == resStored && of.noReply {
		return dst
	}
	return appendSetReply(dst, tk, res, &w, cas)
}

// metaSetLine checks ms's line as memcached does before its flags, and
// returns the value's length, or the error reply.
func metaSetLine(tk *tokens) (vlen int, errReply string) {
	nt := tk.ntokens()
	switch {
	case nt < 3:
		return 0, replyError
	case len(tk.t[1]) > keyMax || nt == 3:
		return 0, errLineFormat + "\r\n"
	case nt > metaMaxTokens:
		return 0, "CLIENT_ERROR options flags too long\r\n"
	}
	v, ok := safeStrtol(tk.t[2])
	if !ok || v < 0 || v > 1<<31-1-2 {
		return 0, errLineFormat + "\r\n"
	}
	return int(v), ""
}

// appendSetReply appends ms's reply: the result's code and the O, k and c
// flags in their order; c is cas, the stored item's CAS (0 when not
// stored).
func appendSetReply(dst []byte, tk *tokens, res int, w *write, cas uint64) []byte {
	dst = append(dst, [...]string{"HD", "EX", "NF", "NS"}[res]...)
	for i := 3; i < tk.n; i++ {
		tok := tk.t[i]
		switch tok[0] {
		case 'O':
			dst = append(append(dst, ' '), tok...)
		case 'k':
			dst = appendKeyFlag(dst, w.key, w.binary)
		case 'c':
			dst = strconv.AppendUint(append(dst, " c"...), cas, 10)
		}
	}
	return append(dst, "\r\n"...)
}

// setMode is the write mode of ms's M flag (0 when it has none); with a
// C flag, a set or replace compares the CAS. False for a mode memcached
// does not know.
func setMode(m byte, hasCAS bool) (int, bool) {
	mode := modeSet
	switch m {
	case 0, 'S':
	case 'E':
		mode = modeAdd
	case 'A':
		mode = modeAppend
	case 'P':
		mode = modePrepend
	case 'R':
		mode = modeReplace
	default:
		return 0, false
	}
	if hasCAS && (mode == modeSet || mode == modeReplace) {
		mode = modeCAS
	}
	return mode, true
}

// opaqueTooLong reports whether an O flag from token start on is longer
// than memcached takes.
func opaqueTooLong(tk *tokens, start int) bool {
	for i := start; i < tk.n; i++ {
		if tk.t[i][0] == 'O' && len(tk.t[i]) > opaqueMax {
			return true
		}
	}
	return false
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
		return "HD"
	}
	s.deleted(it, "md") // a deletion only when the item is not kept stale, as memcached logs one
	if !of.removeValue {
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
	incr, ok := arithMode(of.mode)
	if !ok {
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
			var fail string
			if it, num, fail = s.vivifyNumber(sh, key, &of, now); fail != "" {
				return errLine(dst, fail)
			}
			created = true
		}
	}
	if it == nil {
		return metaMiss(dst, code, tk, key, metaFlags{keyBinary: of.keyBinary})
	}
	if of.hasCASIn && !created {
		it.cas = of.casIn
	}
	return appendArithmetic(dst, tk, key, it, num, &of, res == deltaOK, created, now)
}

// arithMode reads ma's M flag (0 when it has none): whether it adds;
// false for a mode memcached does not know.
func arithMode(m byte) (incr, ok bool) {
	switch m {
	case 0, 'I', '+':
		return true, true
	case 'D', '-':
		return false, true
	}
	return false, false
}

// vivifyNumber creates the item ma's N flag asks for on a miss, holding
// J's initial value; fail is the error when it does not fit. The shard is
// locked.
func (s *Store) vivifyNumber(sh *shard, key string, of *metaFlags, now int64) (it *item, num []byte, fail string) {
	num = strconv.AppendUint(nil, of.initial, 10)
	if !sh.fits(int64(len(key)+len(num)) + ItemOverhead) {
		return nil, nil, "SERVER_ERROR Out of memory allocating new item"
	}
	it = newItem(key, num, 0, 0)
	s.link(sh, it, nil, of.casIn, now)
	return it, num, ""
}

// appendArithmetic appends ma's reply for key's item it, whose value is now
// num: VA or HD, the flags in their order, and the value when asked for;
// q hides the reply of a success (stored).
func appendArithmetic(dst []byte, tk *tokens, key string, it *item, num []byte, of *metaFlags, stored, created bool, now int64) []byte {
	mark := len(dst)
	if of.value {
		dst = strconv.AppendInt(append(dst, "VA "...), int64(len(num)), 10)
	} else {
		dst = append(dst, "HD"...)
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
	if stored && of.noReply {
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
	var decoded [keyMax / 4 * 3]byte // a key of keyMax bytes decodes into it
	if tk.ntokens() >= 4 && string(tk.t[2]) == "b" {
		n := mcbase64.Decode(decoded[:], key)
		if n == 0 {
			return errLine(dst, errLineFormat)
		}
		key = decoded[:n]
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
