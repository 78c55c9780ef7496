package mcdiff

import (
	"bufio"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"VALUE k 0 2 77\r\nMN\r\nEND\r\n", "VALUE k 0 2 <cas>\r\nMN\r\nEND\r\n"},
		{"VALUE k 0 2\r\nab\r\nEND\r\n", "VALUE k 0 2\r\nab\r\nEND\r\n"},
		{"VA 2 c5 t30 t-1 l3 kc9 Oc1\r\nc5\r\n", "VA 2 c<n> t<n> t-1 l<n> kc9 Oc1\r\nc5\r\n"},
		{"ME k exp=-1 la=3 cas=9 fetch=no cls=1 size=63\r\n", "ME k exp=<n> la=<n> cas=<n> fetch=no cls=<n> size=<n>\r\n"},
		{"STORED\r\n", "STORED\r\n"},
	} {
		if got := string(Normalize([]byte(c.in))); got != c.want {
			t.Errorf("Normalize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReadUntilMN(t *testing.T) {
	in := "VALUE k 0 4\r\nMN\r\n\r\nEND\r\nVA 4\r\nMN\r\n\r\nMN\r\nnext"
	r := bufio.NewReader(strings.NewReader(in))
	got, err := ReadUntilMN(r)
	if err != nil || string(got) != "VALUE k 0 4\r\nMN\r\n\r\nEND\r\nVA 4\r\nMN\r\n\r\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ReadUntilMN(r); err == nil {
		t.Fatal("a reply cut short must be an error")
	}
}

func TestGenDeterministic(t *testing.T) {
	opts := Options{Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
	a, b := NewGen(7, opts), NewGen(7, opts)
	for i := range 500 {
		ra, rb := a.Next(), b.Next()
		if string(ra.Wire) != string(rb.Wire) {
			t.Fatalf("request %d differs: %q %q", i, ra.Wire, rb.Wire)
		}
	}
}
