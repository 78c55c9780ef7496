package mcdiff

import (
	"bytes"
	"fmt"
)

// Mismatch describes the first request two targets answered differently.
type Mismatch struct {
	Index   int    // the request's place in the sequence
	Wire    []byte // the request as the first target got it
	A, B    []byte // the raw replies
	NA, NB  []byte // the normalised replies
	History []string
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("mcdiff: request %d %s: replies differ after normalising\n  a: %s\n  b: %s\nlast requests:\n%s",
		m.Index, quote(m.Wire), quote(m.A), quote(m.B), joinLines(m.History))
}

// Compare sends n requests of g to both a and b, in the same order, and
// returns a *Mismatch for the first pair of replies that differ after
// Normalize, or the first transport error.
func Compare(g *Gen, n int, a, b *Session) error {
	var history []string
	for i := range n {
		r := g.Next()
		ra, err := a.Do(r)
		if err != nil {
			return fmt.Errorf("mcdiff: request %d %s to a: %w", i, quote(a.Wire(r)), err)
		}
		rb, err := b.Do(r)
		if err != nil {
			return fmt.Errorf("mcdiff: request %d %s to b: %w", i, quote(b.Wire(r)), err)
		}
		history = append(history, quote(a.Wire(r))+" -> "+quote(ra))
		if len(history) > 8 {
			history = history[1:]
		}
		na, nb := Normalize(ra), Normalize(rb)
		if !bytes.Equal(na, nb) {
			return &Mismatch{Index: i, Wire: a.Wire(r), A: ra, B: rb, NA: na, NB: nb, History: history}
		}
	}
	return nil
}

// quote shows bytes as a Go string, long ones cut in the middle.
func quote(b []byte) string {
	if len(b) > 300 {
		return fmt.Sprintf("%q...(%d bytes)...%q", b[:200], len(b)-250, b[len(b)-50:])
	}
	return fmt.Sprintf("%q", b)
}

func joinLines(ss []string) string {
	var buf bytes.Buffer
	for _, s := range ss {
		buf.WriteString("  " + s + "\n")
	}
	return buf.String()
}
