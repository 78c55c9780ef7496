package lua

import (
	"bytes"
	"testing"
)

// thirdFieldSeeds are VALUE lines' rests and other field layouts.
var thirdFieldSeeds = []string{
	"k 0 5", "k 0 5 123", "key  12\t7", " lead 1 2", "a b", "", "   ", "a b c d e",
	"k\xc2\xa0x 0 5", "k\u2003 0 5", "\xff 1 2", "k 0 5\r", "k\v0\f5",
}

func TestThirdField(t *testing.T) {
	for _, s := range thirdFieldSeeds {
		checkThirdField(t, []byte(s))
	}
	line := []byte("somekey 0 100 42")
	if n := testing.AllocsPerRun(100, func() { thirdField(line) }); n != 0 {
		t.Errorf("thirdField allocates %v times per call on an ASCII line", n)
	}
}

// FuzzThirdField checks thirdField against bytes.Fields.
func FuzzThirdField(f *testing.F) {
	for _, s := range thirdFieldSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkThirdField(t, b) })
}

func checkThirdField(t *testing.T, b []byte) {
	t.Helper()
	got, ok := thirdField(b)
	fs := bytes.Fields(b)
	if ok != (len(fs) >= 3) || ok && !bytes.Equal(got, fs[2]) {
		t.Errorf("thirdField(%q) = %q, %t; bytes.Fields gives %q", b, got, ok, fs)
	}
}
