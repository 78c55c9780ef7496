package codectest

import (
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"shardproxy/codec"
)

// ByteCuts returns the buffer lengths of a reader that gets an n-byte
// input one byte at a time: 1, 2, ... n.
func ByteCuts(n int) []int {
	cuts := make([]int, n)
	for i := range cuts {
		cuts[i] = i + 1
	}
	return cuts
}

// RandomCuts returns the buffer lengths of a reader that gets an n-byte
// input in pieces of 1 to most bytes, drawn from rng; the last is n.
func RandomCuts(n, most int, rng *rand.Rand) []int {
	var cuts []int
	for c := 0; c < n; {
		c = min(n, c+1+rng.IntN(most))
		cuts = append(cuts, c)
	}
	return cuts
}

// DataCuts returns RandomCuts for data with a source seeded by data's
// bytes: a fuzz target's cuts vary with its input and repeat with it.
func DataCuts(data []byte, most int) []int {
	h := fnv.New64a()
	h.Write(data)
	return RandomCuts(len(data), most, rand.New(rand.NewPCG(h.Sum64(), uint64(most))))
}

// poison is what CheckResume overwrites the framed bytes with: no reply
// of any dialect starts with it.
const poison = 0xff

// CheckResume feeds data to d.ResumeReply as a reader does, in a buffer
// grown to each length of cuts (increasing, the last len(data)), with one
// ReplyState, until the reply is framed or rejected. It asserts that every
// call (about 128 of them when there are more) answers as ParseReply does
// on the same bytes: the same length and kind, the same error text and
// announced length; that the final answer agrees with ParseReply on all of
// data (length, kind, and incomplete, rejected or framed); that the state
// only moves forward and is zero after a framed or rejected reply. The
// bytes before the state's offset are overwritten after each call: a
// dialect that examines them again misframes and the check fails.
func CheckResume(t testing.TB, d codec.Dialect, req *codec.Request, data []byte, cuts []int) {
	t.Helper()
	if len(data) == 0 {
		cuts = []int{0}
	}
	if len(cuts) == 0 || cuts[len(cuts)-1] != len(data) {
		t.Fatalf("cuts %v do not end at %d", cuts, len(data))
	}
	compareEvery := max(1, len(cuts)/128)
	buf := make([]byte, 0, len(data))
	var st codec.ReplyState
	for i, c := range cuts {
		buf = append(buf, data[len(buf):c]...)
		off := st.Off
		var r framing
		r.n, r.kind, r.err = d.ResumeReply(buf, req, &st)
		incomplete := errors.Is(r.err, codec.ErrIncomplete)
		if i%compareEvery == 0 || i == len(cuts)-1 || !incomplete {
			checkAsParsed(t, d, req, data, c, r)
		}
		if incomplete {
			checkPending(t, data, c, r, off, &st)
			poisonExamined(buf[off:st.Off])
			continue
		}
		checkFramed(t, d, req, data, c, r, st)
		return
	}
}

// framing is what ResumeReply or ParseReply answered.
type framing struct {
	n    int
	kind codec.ReplyKind
	err  error
}

// checkAsParsed checks that r, ResumeReply's answer on the first c bytes
// of data, is ParseReply's on the same bytes.
func checkAsParsed(t testing.TB, d codec.Dialect, req *codec.Request, data []byte, c int, r framing) {
	t.Helper()
	wn, wkind, werr := d.ParseReply(data[:c], req)
	if r.n != wn || r.kind != wkind || errText(r.err) != errText(werr) || codec.Needed(r.err) != codec.Needed(werr) {
		t.Fatalf("%.200q in pieces, at %d bytes: %d, %d, %v (need %d); ParseReply: %d, %d, %v (need %d)",
			data, c, r.n, r.kind, r.err, codec.Needed(r.err), wn, wkind, werr, codec.Needed(werr))
	}
}

// checkPending checks an incomplete answer r at c bytes: nothing framed,
// and the state's offset moved forward from off within the bytes read.
func checkPending(t testing.TB, data []byte, c int, r framing, off int, st *codec.ReplyState) {
	t.Helper()
	if r.n != 0 || st.Off < off || st.Off > c {
		t.Fatalf("%.200q at %d bytes: incomplete with n=%d, state offset %d after %d", data, c, r.n, st.Off, off)
	}
}

// poisonExamined overwrites bytes the state says are examined: a dialect
// that reads them again misframes.
func poisonExamined(b []byte) {
	for j := range b {
		b[j] = poison
	}
}

// checkFramed checks the final answer r, framed or rejected at c bytes:
// the state is zero and ParseReply on all of data agrees.
func checkFramed(t testing.TB, d codec.Dialect, req *codec.Request, data []byte, c int, r framing, st codec.ReplyState) {
	t.Helper()
	if st != (codec.ReplyState{}) {
		t.Fatalf("%.200q at %d bytes: state %+v left after %d, %v", data, c, st, r.n, r.err)
	}
	wn, wkind, werr := d.ParseReply(data, req)
	if r.n != wn || r.kind != wkind || (r.err == nil) != (werr == nil) || errors.Is(werr, codec.ErrIncomplete) {
		t.Fatalf("%.200q: in pieces %d, %d, %v at %d bytes; whole %d, %d, %v", data, r.n, r.kind, r.err, c, wn, wkind, werr)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// CheckResumeSplits is CheckResume for a fuzz input: data a byte at a
// time when it is short, and in pieces of random sizes drawn from its
// bytes (so that they repeat with it).
func CheckResumeSplits(t testing.TB, d codec.Dialect, req *codec.Request, data []byte) {
	t.Helper()
	if len(data) <= 1024 {
		CheckResume(t, d, req, data, ByteCuts(len(data)))
	}
	for _, most := range []int{7, 300} {
		CheckResume(t, d, req, data, DataCuts(data, most))
	}
}
