package codec_test

import (
	"errors"
	"slices"
	"testing"

	"shardproxy/codec"
)

type fake struct{ codec.Dialect }

func (fake) Name() string { return "fake-test" }

func TestRegistry(t *testing.T) {
	codec.Register(fake{})
	d, ok := codec.Lookup("fake-test")
	if !ok || d.Name() != "fake-test" {
		t.Fatalf("Lookup = %v, %v", d, ok)
	}
	if _, ok := codec.Lookup("nope"); ok {
		t.Fatal("Lookup found an unregistered dialect")
	}
	if !slices.Contains(codec.Names(), "fake-test") {
		t.Fatalf("Names() = %v", codec.Names())
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	codec.Register(fake{})
}

func TestRequestReset(t *testing.T) {
	r := codec.Request{Name: "get", Keys: [][]byte{[]byte("a")}, Buf: make([]byte, 10, 64), Close: true, Mode: codec.ModeQuiet}
	r.Reset()
	if r.Name != "" || len(r.Keys) != 0 || len(r.Buf) != 0 || cap(r.Buf) != 64 || r.Close || r.Mode != codec.ModeNormal {
		t.Fatalf("Reset left %+v", r)
	}
}

func TestIncomplete(t *testing.T) {
	for _, tt := range []struct{ need, want int }{
		{0, 0}, {100, 0}, {codec.HintAbove, 0}, {codec.HintAbove + 1, codec.HintAbove + 1}, {1 << 30, 1 << 30},
	} {
		err := codec.Incomplete(tt.need)
		if !errors.Is(err, codec.ErrIncomplete) {
			t.Errorf("Incomplete(%d) = %v: not ErrIncomplete", tt.need, err)
		}
		if got := codec.Needed(err); got != tt.want {
			t.Errorf("Needed(Incomplete(%d)) = %d, want %d", tt.need, got, tt.want)
		}
	}
	if got := codec.Needed(errors.New("other")); got != 0 {
		t.Errorf("Needed(other error) = %d", got)
	}
}
