package mcdiff

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Options shape a Gen's requests. The zero Options is valid.
type Options struct {
	// Newer adds the meta flags memcached 1.6.18 (Debian's) refuses as
	// invalid: E (explicit CAS) for ms, md and ma, and x (keep an empty
	// item) for md.
	Newer bool
	// Keys is the number of keys; zero means 12. Few keys make
	// commands meet each other's items.
	Keys int
	// BigValues is the share of storage commands with a value near 1 MiB
	// (some just over memcached's default item size); zero means 1%, a
	// negative value none.
	BigValues float64
	// Now is the clock for absolute expiry times; nil means time.Now.
	Now func() time.Time
}

// Gen generates random requests. Every request is complete and framed
// the way a proxy frames it (a storage command's data block has its
// declared length), so a server reads each as exactly one request.
type Gen struct {
	r    *rand.Rand
	opts Options
	keys []string
}

// NewGen returns a Gen whose sequence depends only on seed and opts.
func NewGen(seed uint64, opts Options) *Gen {
	if opts.Keys <= 0 {
		opts.Keys = 12
	}
	if opts.BigValues == 0 {
		opts.BigValues = 0.01
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), opts: opts}
	for i := range opts.Keys {
		g.keys = append(g.keys, fmt.Sprintf("k%d", i))
	}
	g.keys = append(g.keys, "n0", "n1", "n2") // mostly numeric values
	return g
}

func (g *Gen) pick(n int) int        { return g.r.IntN(n) }
func (g *Gen) chance(p float64) bool { return g.r.Float64() < p }

func pickOf[T any](g *Gen, xs ...T) T { return xs[g.r.IntN(len(xs))] }

// key returns a key of the key space.
func (g *Gen) key() string { return g.keys[g.pick(len(g.keys))] }

// longKey is one byte longer than memcached allows.
var longKey = strings.Repeat("L", 251)

// exptime returns a TTL far from any second boundary a test could meet:
// none, long relative ones, already expired ones (negative, an absolute
// time in the past) and an absolute time an hour ahead.
func (g *Gen) exptime() string {
	switch g.pick(8) {
	case 0, 1, 2:
		return "0"
	case 3:
		return "1000"
	case 4:
		return "86400"
	case 5:
		return pickOf(g, "-1", "-1000")
	case 6:
		return pickOf(g, "2592001", "1000000000")
	default:
		return strconv.FormatInt(g.opts.Now().Unix()+3600, 10)
	}
}

// flags returns client flags.
func (g *Gen) flags() string {
	return pickOf(g, "0", "0", "1", "42", "65535", "4294967295")
}

// value returns a value: empty, short, numeric, up to 10 KB, or near 1 MiB.
func (g *Gen) value() []byte {
	if g.opts.BigValues > 0 && g.chance(g.opts.BigValues) {
		n := 1048516 - 8 + g.pick(12) // around the largest value of a 2-byte key, flags 0
		if g.chance(0.5) {
			n = 600<<10 + g.pick(400<<10)
		}
		return g.bytes(n)
	}
	switch g.pick(10) {
	case 0:
		return nil
	case 1, 2, 3:
		// Numbers stay below 2^63 and no value holds '-': incrementing a
		// value of 2^63 or more, memcached 1.6.18 looks for a '-' past the
		// end of the value (strchr up to the next NUL, in stale memory),
		// so its answer is not reproducible. Unit tests cover the wrap.
		return []byte(pickOf(g, "0", "1", "9", "10", "99", "100", "9999",
			"4294967295", "12abc", " 7", "+5", "007", "4294967296"))
	case 4, 5, 6:
		return g.bytes(1 + g.pick(20))
	case 7, 8:
		return g.bytes(g.pick(300))
	default:
		return g.bytes(g.pick(10 << 10))
	}
}

// bytes returns n value bytes: printable, sometimes with CR, LF and "MN".
func (g *Gen) bytes(n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \r\nMN"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[g.pick(len(alphabet))]
	}
	return b
}

// Next returns the next request.
func (g *Gen) Next() Request {
	switch g.pick(100) {
	case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11:
		return g.textGet()
	case 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25:
		return g.textStore()
	case 26, 27, 28, 29:
		return g.textCAS()
	case 30, 31, 32, 33, 34, 35:
		return g.textArith()
	case 36, 37, 38:
		return g.textTouch()
	case 39, 40, 41, 42:
		return g.textDelete()
	case 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56:
		return g.metaGet()
	case 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69:
		return g.metaSet()
	case 70, 71, 72, 73, 74, 75:
		return g.metaDelete()
	case 76, 77, 78, 79, 80, 81, 82:
		return g.metaArith()
	case 83:
		return Request{Wire: []byte("mn\r\n")}
	case 84, 85:
		return Request{Wire: []byte("me " + g.key() + "\r\n")}
	default:
		return g.malformed()
	}
}

func line(parts ...string) []byte {
	return []byte(strings.Join(parts, " ") + "\r\n")
}

func (g *Gen) textGet() Request {
	cmd := pickOf(g, "get", "gets", "gat", "gats")
	parts := []string{cmd}
	if cmd[1] == 'a' {
		parts = append(parts, g.exptime())
	}
	for range 1 + g.pick(4) {
		parts = append(parts, g.key())
	}
	return Request{Wire: line(parts...)}
}

func (g *Gen) noreply(parts []string) []string {
	if g.chance(0.2) {
		return append(parts, "noreply")
	}
	return parts
}

func withData(l []byte, v []byte) []byte {
	return append(append(l, v...), "\r\n"...)
}

func (g *Gen) textStore() Request {
	cmd := pickOf(g, "set", "set", "set", "add", "replace", "append", "prepend")
	v := g.value()
	parts := g.noreply([]string{cmd, g.key(), g.flags(), g.exptime(), strconv.Itoa(len(v))})
	return Request{Wire: withData(line(parts...), v)}
}

func (g *Gen) textCAS() Request {
	k := g.key()
	if g.chance(0.5) {
		return Request{Wire: line("gets", k)}
	}
	v := g.value()
	cas := pickOf(g, CASMark, CASMark, CASMark, "0")
	parts := g.noreply([]string{"cas", k, g.flags(), g.exptime(), strconv.Itoa(len(v)), cas})
	return Request{Wire: withData(line(parts...), v), CASKey: k}
}

// delta returns an incr/decr amount, small so that values stay below 2^63
// (see value), sometimes malformed.
func (g *Gen) delta() string {
	return pickOf(g, "1", "1", "5", "100", "4294967296", "0", "abc", "-1", "+3")
}

func (g *Gen) textArith() Request {
	cmd, d := pickOf(g, "incr", "decr"), g.delta()
	if cmd == "decr" && g.chance(0.2) {
		d = "18446744073709551615"
	}
	parts := g.noreply([]string{cmd, g.key(), d})
	return Request{Wire: line(parts...)}
}

func (g *Gen) textTouch() Request {
	parts := g.noreply([]string{"touch", g.key(), pickOf(g, g.exptime(), "abc")})
	return Request{Wire: line(parts...)}
}

func (g *Gen) textDelete() Request {
	parts := []string{"delete", g.key()}
	switch g.pick(6) {
	case 0:
		parts = append(parts, "0")
	case 1:
		parts = append(parts, "0", "noreply")
	case 2:
		parts = append(parts, "noreply")
	case 3:
		parts = append(parts, "5")
	}
	return Request{Wire: line(parts...)}
}

// metaKey returns a key for a meta command and the flags that go with it:
// sometimes base64 with b, the key as the CAS book knows it.
func (g *Gen) metaKey() (wireKey, casKey string, flags []string) {
	k := g.key()
	if g.chance(0.15) {
		raw := k
		if g.chance(0.3) {
			raw = "\x00\x01" + k
		}
		enc := base64.StdEncoding.EncodeToString([]byte(raw))
		return enc, "b:" + enc, []string{"b"}
	}
	return k, k, nil
}

// shuffle puts flags in a random order: memcached reads them in order.
func (g *Gen) shuffle(flags []string) []string {
	g.r.Shuffle(len(flags), func(i, j int) { flags[i], flags[j] = flags[j], flags[i] })
	return flags
}

func (g *Gen) opaque() string {
	return "O" + pickOf(g, "1", "abc", "x9", strings.Repeat("o", 31))
}

func (g *Gen) ttlFlag(name string) string { return name + g.exptime() }

// some adds each optional flag with probability p.
func (g *Gen) some(p float64, flags []string, optional ...string) []string {
	for _, f := range optional {
		if g.chance(p) {
			flags = append(flags, f)
		}
	}
	return flags
}

func (g *Gen) metaGet() Request {
	k, _, flags := g.metaKey()
	flags = g.some(0.3, flags, "v", "f", "s", "t", "h", "l", "q", "u", "k", g.opaque())
	if g.chance(0.3) {
		flags = append(flags, "c", "k")
	}
	if g.chance(0.15) {
		flags = append(flags, g.ttlFlag("T"))
	}
	if g.chance(0.15) {
		flags = append(flags, g.ttlFlag("N"))
	}
	if g.chance(0.15) {
		flags = append(flags, "R"+pickOf(g, "30", "5000"))
	}
	flags = dedupe(flags)
	return Request{Wire: line(append([]string{"mg", k}, g.shuffle(flags)...)...)}
}

func (g *Gen) metaSet() Request {
	k, casKey, flags := g.metaKey()
	v := g.value()
	flags = g.some(0.25, flags, "q", "k", "c", g.opaque(), "F"+g.flags(), g.ttlFlag("T"), "I")
	if g.chance(0.3) {
		flags = append(flags, "C"+pickOf(g, CASMark, CASMark, "0"))
	}
	if g.chance(0.3) {
		flags = append(flags, "M"+pickOf(g, "S", "E", "A", "P", "R", "s", "e", "a"))
	}
	if g.opts.Newer && g.chance(0.1) {
		flags = append(flags, "E"+strconv.Itoa(1<<40+g.pick(1000)))
	}
	flags = dedupe(flags)
	parts := append([]string{"ms", k, strconv.Itoa(len(v))}, g.shuffle(flags)...)
	return Request{Wire: withData(line(parts...), v), CASKey: casKey}
}

func (g *Gen) metaDelete() Request {
	k, casKey, flags := g.metaKey()
	flags = g.some(0.25, flags, "q", "k", g.opaque(), "I", g.ttlFlag("T"))
	if g.chance(0.3) {
		flags = append(flags, "C"+pickOf(g, CASMark, CASMark, "0"))
	}
	if g.opts.Newer {
		flags = g.some(0.15, flags, "x", "E"+strconv.Itoa(1<<41+g.pick(1000)))
	}
	flags = dedupe(flags)
	return Request{Wire: line(append([]string{"md", k}, g.shuffle(flags)...)...), CASKey: casKey}
}

func (g *Gen) metaArith() Request {
	k, casKey, flags := g.metaKey()
	flags = g.some(0.3, flags, "q", "v", "t", "c", "k", g.opaque(), g.ttlFlag("T"), g.ttlFlag("N"),
		"J"+pickOf(g, "0", "13", "4294967295"), "D"+g.delta())
	if g.chance(0.3) {
		flags = append(flags, "M"+pickOf(g, "I", "+", "D", "-", "i", "x"))
	}
	if g.chance(0.2) {
		flags = append(flags, "C"+pickOf(g, CASMark, CASMark, "0"))
	}
	if g.opts.Newer && g.chance(0.1) {
		flags = append(flags, "E"+strconv.Itoa(1<<42+g.pick(1000)))
	}
	flags = dedupe(flags)
	return Request{Wire: line(append([]string{"ma", k}, g.shuffle(flags)...)...), CASKey: casKey}
}

// dedupe drops flags whose letter came before, so that a request is
// refused as a duplicate only where malformed asks for it.
func dedupe(flags []string) []string {
	seen := map[byte]bool{}
	out := flags[:0]
	for _, f := range flags {
		if !seen[f[0]] {
			seen[f[0]] = true
			out = append(out, f)
		}
	}
	return out
}

// malformed returns a request a server must refuse, framed so that the
// server still reads exactly that request. Its sixteen kinds come in four
// families, each drawn with its numbers.
func (g *Gen) malformed() Request {
	k := g.key()
	switch n := g.pick(16); n {
	case 0, 1, 2:
		return g.tooLongKey(n, k)
	case 3, 4:
		return g.badDataEnd(n, k)
	case 11, 12, 14:
		return g.badCommandLine(n, k)
	default:
		return g.badMetaFlags(n, k)
	}
}

// tooLongKey is malformed's 0 to 2: a key past memcached's 250 bytes.
func (g *Gen) tooLongKey(n int, k string) Request {
	switch n {
	case 0:
		return Request{Wire: line("get", longKey)}
	case 1:
		return Request{Wire: line("get", k, longKey, g.key())}
	default:
		// memcached reads no data block after a refused line
		return Request{Wire: line(pickOf(g, "set", "ms"), longKey, "0", "0", "1")}
	}
}

// badDataEnd is malformed's 3 and 4: a data block whose end is not CRLF.
func (g *Gen) badDataEnd(n int, k string) Request {
	if n == 3 {
		return Request{Wire: []byte("set " + k + " 0 0 2\r\nabXY")}
	}
	return Request{Wire: []byte("ms " + k + " 2 " + pickOf(g, "", "q ") + "T0\r\nabXY")}
}

// badCommandLine is malformed's 11, 12 and 14: a command without its key,
// a storage command with bad numbers, a command memcached does not know.
func (g *Gen) badCommandLine(n int, k string) Request {
	switch n {
	case 11:
		return Request{Wire: line(pickOf(g, "get", "mg", "ms", "md", "ma", "set", "incr", "touch", "delete", "cas"))}
	case 12:
		return Request{Wire: line(pickOf(g, "set", "add", "cas"), k, pickOf(g, "x", "-1", "0"), "0")}
	default:
		return Request{Wire: line(pickOf(g, "bogus", "x", "GET", "mx"), k)}
	}
}

// badMetaFlags is malformed's 5 to 10, 13 and 15: a meta command with a
// repeated, unknown, too long or badly formed flag, a key that is no
// base64, or too many flags.
func (g *Gen) badMetaFlags(n int, k string) Request {
	switch n {
	case 5:
		return Request{Wire: line("mg", k, "v", "v")}
	case 6:
		return Request{Wire: line(pickOf(g, "mg", "md", "ma"), k, "z")}
	case 7:
		return Request{Wire: line(pickOf(g, "mg", "md", "ma"), k, "O"+strings.Repeat("o", 33))}
	case 8:
		return Request{Wire: withData(line("ms", k, "1", "O"+strings.Repeat("o", 33)), []byte("x"))}
	case 9:
		return Request{Wire: line(pickOf(g, "mg", "ma"), k, pickOf(g, "Tabc", "N", "R-", "Mxx", "MZ", "Dabc", "Jx"))}
	case 10:
		return Request{Wire: withData(line("ms", k, "1", pickOf(g, "MZ", "Mxx", "Fabc", "Tx", "Cx")), []byte("x"))}
	case 13:
		return Request{Wire: line("mg", "YQ", "b", "v")} // not a whole base64 block
	default:
		many := []string{"mg", k}
		for i := range 20 {
			many = append(many, "O"+strconv.Itoa(i))
		}
		return Request{Wire: line(many...)}
	}
}
