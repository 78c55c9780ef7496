package store

import (
	"bytes"
	"strconv"
)

// maxTokens is memcached's MAX_TOKENS less its terminal token: a command
// line is cut into at most 23 tokens and a remainder.
const maxTokens = 23

// tokens is a command line cut at spaces, as memcached's tokenize_command
// cuts it.
type tokens struct {
	t    [maxTokens][]byte
	n    int
	rest []byte // the line after the 23rd token, nil when there is none
}

// ntokens is memcached's count, which includes the terminal token.
func (tk *tokens) ntokens() int { return tk.n + 1 }

// at returns token i, or nil past the last (memcached's terminal token).
func (tk *tokens) at(i int) []byte {
	if i < tk.n {
		return tk.t[i]
	}
	return nil
}

func tokenize(line []byte, tk *tokens) {
	tk.n, tk.rest = 0, nil
	s := 0
	for i := 0; i < len(line); i++ {
		if line[i] != ' ' {
			continue
		}
		if s != i {
			tk.t[tk.n] = line[s:i]
			tk.n++
			if tk.n == maxTokens {
				if i+1 < len(line) {
					tk.rest = line[i+1:]
				}
				return
			}
		}
		s = i + 1
	}
	if s != len(line) {
		tk.t[tk.n] = line[s:]
		tk.n++
	}
}

// Wire replies of more than one use.
const (
	replyError    = "ERROR\r\n"
	errLineFormat = "CLIENT_ERROR bad command line format"
	errBadChunk   = "CLIENT_ERROR bad data chunk"
	errTooLarge   = "SERVER_ERROR object too large for cache"
	errNoMemory   = "SERVER_ERROR out of memory storing object"
	errNonNumeric = "CLIENT_ERROR cannot increment or decrement non-numeric value"
	errExptime    = "CLIENT_ERROR invalid exptime argument"
)

// Do answers one client request: wire is the command line with its "\n"
// or "\r\n" and, for a storage command, the data block and its "\r\n", as
// a proxy frames it. It appends to dst the bytes memcached 1.6 answers
// (nothing where noreply or a meta q flag hides the reply) and returns the
// extended slice.
//
// The commands are get, gets, gat, gats, set, add, replace, append,
// prepend, cas, incr, decr, touch, delete and the meta commands mg, ms,
// md, ma, mn and me. Other memcached commands (stats, version, flush_all,
// verbosity, quit, watch ...) get no bytes at all, as memcached 1.6.45's
// proxy answers them when a route hands them to mcp.internal; a command
// memcached does not know gets "ERROR". Bytes after a command that reads no
// data block, or after a data block, are ignored.
func (s *Store) Do(dst, wire []byte) []byte {
	line, data := wire, []byte(nil)
	if nl := bytes.IndexByte(wire, '\n'); nl >= 0 {
		line, data = wire[:nl], wire[nl+1:]
		if len(line) > 1 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
	}
	if z := bytes.IndexByte(line, 0); z >= 0 {
		line = line[:z] // memcached reads the line as a C string
	}
	var tk tokens
	tokenize(line, &tk)
	if tk.n == 0 || len(tk.t[0]) < 2 {
		return append(dst, replyError...)
	}
	if cmd := tk.t[0]; len(cmd) == 2 && cmd[0] == 'm' {
		return s.doMeta(dst, &tk, data)
	}
	return s.doText(dst, line, &tk, data)
}

// doMeta answers a meta command (a two-letter command starting with m).
func (s *Store) doMeta(dst []byte, tk *tokens, data []byte) []byte {
	switch tk.t[0][1] {
	case 'g':
		return s.metaGet(dst, tk)
	case 's':
		return s.metaSet(dst, tk, data)
	case 'd':
		return s.metaDelete(dst, tk)
	case 'a':
		return s.metaArithmetic(dst, tk)
	case 'n':
		return append(dst, "MN\r\n"...)
	case 'e':
		return s.metaDebug(dst, tk)
	}
	return append(dst, replyError...)
}

// doText answers a text command; a command with a number of tokens
// memcached does not take gets "ERROR", as an unknown one does.
func (s *Store) doText(dst, line []byte, tk *tokens, data []byte) []byte {
	cmd := tk.t[0]
	nt := tk.ntokens()
	switch string(cmd) {
	case "get", "gets", "gat", "gats":
		if nt >= 3 {
			return s.textGet(dst, line, tk, cmd[len(cmd)-1] == 's', cmd[1] == 'a')
		}
	case "set", "add", "append", "replace", "prepend":
		if between(nt, 6, 7) {
			return s.textStore(dst, tk, storeModes[string(cmd)], data)
		}
	case "cas":
		if between(nt, 7, 8) {
			return s.textStore(dst, tk, modeCAS, data)
		}
	case "incr", "decr":
		if between(nt, 4, 5) {
			return s.textArithmetic(dst, tk, cmd[0] == 'i')
		}
	case "touch":
		if between(nt, 4, 5) {
			return s.textTouch(dst, tk)
		}
	case "delete":
		if between(nt, 3, 5) {
			return s.textDelete(dst, tk)
		}
	case "stats", "shutdown", "slabs", "cache_memlimit", "bget", "flush_all", "version", "quit",
		"lru_crawler", "watch", "verbosity", "lru", "extstore", "refresh_certs", "debugtime", "misbehave":
		return dst
	}
	return append(dst, replyError...)
}

// between reports whether n is in [lo, hi].
func between(n, lo, hi int) bool { return lo <= n && n <= hi }

// reply appends a one-line reply unless noreply hides it.
func reply(dst []byte, noreply bool, line string) []byte {
	if noreply {
		return dst
	}
	dst = append(dst, line...)
	return append(dst, "\r\n"...)
}

// noreply reports whether the token before the terminal one is "noreply"
// (memcached's set_noreply_maybe).
func noreply(tk *tokens) bool {
	return tk.n >= 1 && string(tk.at(tk.ntokens()-2)) == "noreply"
}

// textGet answers get, gets, gat and gats.
func (s *Store) textGet(dst, line []byte, tk *tokens, withCAS, touch bool) []byte {
	keys := line[len(tk.t[0]):]
	var exp int64
	now := s.now()
	if touch {
		e, ok := safeStrtol(tk.t[1])
		if !ok {
			return reply(dst, false, errExptime)
		}
		exp = s.realtime(int64(e), now)
		keys = bytes.TrimLeft(keys, " ")
		keys = keys[len(tk.t[1]):]
	}
	mark := len(dst)
	for len(keys) > 0 {
		keys = bytes.TrimLeft(keys, " ")
		if len(keys) == 0 {
			break
		}
		k := keys
		if sp := bytes.IndexByte(keys, ' '); sp >= 0 {
			k = keys[:sp]
		}
		keys = keys[len(k):]
		if len(k) > keyMax {
			// memcached drops the values found so far (their lookups
			// still counted as reads)
			return reply(dst[:mark], false, errLineFormat)
		}
		dst = s.getOne(dst, string(k), withCAS, touch, exp, now)
	}
	return append(dst, "END\r\n"...)
}

// getOne appends one key's VALUE block, if it has one.
func (s *Store) getOne(dst []byte, key string, withCAS, touch bool, exp, now int64) []byte {
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	it := sh.get(key, now)
	if it == nil {
		sh.st.misses++
		return dst
	}
	sh.st.hits++
	sh.bump(it, now)
	if touch {
		it.exp = exp
	}
	v := it.value()
	dst = append(dst, "VALUE "...)
	dst = append(dst, key...)
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, uint64(it.flags), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(len(v)), 10)
	if withCAS {
		dst = append(dst, ' ')
		dst = strconv.AppendUint(dst, it.cas, 10)
	}
	dst = append(dst, "\r\n"...)
	dst = append(dst, v...)
	return append(dst, "\r\n"...)
}

// Storage modes (memcached's NREAD_*).
const (
	modeSet = iota
	modeAdd
	modeReplace
	modeAppend
	modePrepend
	modeCAS
)

var storeModes = map[string]int{
	"set": modeSet, "add": modeAdd, "replace": modeReplace, "append": modeAppend, "prepend": modePrepend,
}

// textStore answers set, add, replace, append, prepend and cas.
func (s *Store) textStore(dst []byte, tk *tokens, mode int, data []byte) []byte {
	quiet := noreply(tk)
	key := tk.t[1]
	if len(key) > keyMax {
		return reply(dst, quiet, errLineFormat)
	}
	flags, ok1 := safeStrtoul(tk.t[2])
	exptime, ok2 := safeStrtol(tk.t[3])
	vlen, ok3 := safeStrtol(tk.t[4])
	if !ok1 || !ok2 || !ok3 {
		return reply(dst, quiet, errLineFormat)
	}
	var reqCAS uint64
	if mode == modeCAS {
		var ok bool
		if reqCAS, ok = safeStrtoull(tk.at(5)); !ok {
			return reply(dst, quiet, errLineFormat)
		}
	}
	if vlen < 0 || vlen > 1<<31-1-2 {
		return reply(dst, quiet, errLineFormat)
	}
	now := s.now()
	w := write{key: string(key), flags: flags, exp: s.realtime(int64(exptime), now), mode: mode, reqCAS: reqCAS}
	res, _, fail := s.store(w, data, int(vlen), now)
	if fail != "" {
		return reply(dst, quiet, fail)
	}
	return reply(dst, quiet, [...]string{"STORED", "EXISTS", "NOT_FOUND", "NOT_STORED"}[res])
}

// textArithmetic answers incr and decr.
func (s *Store) textArithmetic(dst []byte, tk *tokens, incr bool) []byte {
	quiet := noreply(tk)
	key := tk.t[1]
	if len(key) > keyMax {
		return reply(dst, quiet, errLineFormat)
	}
	delta, ok := safeStrtoull(tk.t[2])
	if !ok {
		return reply(dst, quiet, "CLIENT_ERROR invalid numeric delta argument")
	}
	sh := s.shardOf(string(key))
	now := s.now()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, num, res := s.addDelta(sh, string(key), incr, delta, 0, now)
	switch res {
	case deltaOK:
		return reply(dst, quiet, string(num))
	case deltaNonNumeric:
		return reply(dst, quiet, errNonNumeric)
	case deltaNoMemory:
		return reply(dst, quiet, "SERVER_ERROR out of memory")
	}
	return reply(dst, quiet, "NOT_FOUND")
}

// textTouch answers touch.
func (s *Store) textTouch(dst []byte, tk *tokens) []byte {
	quiet := noreply(tk)
	key := tk.t[1]
	if len(key) > keyMax {
		return reply(dst, quiet, errLineFormat)
	}
	e, ok := safeStrtol(tk.t[2])
	if !ok {
		return reply(dst, quiet, errExptime)
	}
	if !s.touch(string(key), func(now int64) int64 { return s.realtime(int64(e), now) }) {
		return reply(dst, quiet, "NOT_FOUND")
	}
	return reply(dst, quiet, "TOUCHED")
}

// textDelete answers delete, which takes an old hold time of 0 and noreply.
func (s *Store) textDelete(dst []byte, tk *tokens) []byte {
	quiet := false
	if nt := tk.ntokens(); nt > 3 {
		zero := string(tk.t[2]) == "0"
		quiet = noreply(tk)
		if !(nt == 4 && (zero || quiet) || nt == 5 && zero && quiet) {
			return reply(dst, quiet, "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]")
		}
	}
	key := tk.t[1]
	if len(key) > keyMax {
		return reply(dst, quiet, errLineFormat)
	}
	if !s.delete(string(key), "delete") {
		return reply(dst, quiet, "NOT_FOUND")
	}
	return reply(dst, quiet, "DELETED")
}
