package route

import (
	"errors"
	"strings"
	"testing"
)

// TestHubSkips: a watcher that is not drained keeps what fits in
// WatchBuffer, counts what does not, and says so before its next line.
func TestHubSkips(t *testing.T) {
	var h Hub
	w, err := h.Watch(1)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := h.Watch(2)
	if !h.Watching(1) || !h.Watching(2) || h.Watching(4) {
		t.Fatal("Watching does not follow the watchers' streams")
	}
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for range WatchBuffer/len(line) + 5 {
		h.Publish(1, line)
	}
	got, ok := w.Next(nil)
	if !ok || len(got) != WatchBuffer {
		t.Fatalf("first drain: %d bytes, %v", len(got), ok)
	}
	h.Publish(1, []byte("next\n"))
	if got, _ := w.Next(nil); string(got) != "skipped=5\nnext\n" {
		t.Errorf("after the drain: %q", got)
	}
	other.Close()
	if h.Watching(2) {
		t.Error("a closed watcher is still counted")
	}
	if _, ok := other.Next(nil); ok {
		t.Error("Next on a closed watcher")
	}
}

// TestHubLimit: at most MaxWatchers at once.
func TestHubLimit(t *testing.T) {
	var h Hub
	ws := make([]*Watcher, 0, MaxWatchers)
	for range MaxWatchers {
		w, err := h.Watch(1)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	if _, err := h.Watch(1); !errors.Is(err, ErrTooManyWatchers) {
		t.Fatalf("watcher %d: %v", MaxWatchers+1, err)
	}
	ws[0].Close()
	if _, err := h.Watch(1); err != nil {
		t.Fatalf("after a close: %v", err)
	}
}
