package dnspool

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"shardproxy/config"
)

// servers returns servers named n0.. at 10.0.0.<addr[i]>:11211.
func servers(t *testing.T, addrs ...int) []config.Server {
	t.Helper()
	var out []config.Server
	for i, a := range addrs {
		s, err := config.ParseServerLine(fmt.Sprintf("10.0.0.%d:11211:1 n%d", a, i))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func testWatcher(maxChange float64, maxServers int) *watcher {
	sf := &config.ServersFrom{DNS: "x", Type: config.DNSTypeSRV, Interval: time.Second, MaxChange: maxChange, MaxServers: maxServers}
	w, _ := newWatcher("p", sf, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	w.setReady() // no Resolve waits
	return w
}

// The guards, one resolution's outcome at a time: what is applied, what
// is kept and what is held, and the figures.
func TestWatcherGuards(t *testing.T) {
	now := time.Unix(100, 0)
	fail := errors.New("dnspool: timeout")
	type step struct {
		got     []config.Server
		err     error
		changed bool            // observe's answer
		cur     []config.Server // the set in use after
		holding bool
	}
	four, three := servers(t, 1, 2, 3, 4), servers(t, 1, 2, 3)
	swapped := servers(t, 2, 1, 3) // n0 and n1 readdressed: 2 of 3
	tests := []struct {
		name       string
		maxServers int
		steps      []step
		held       int64
		failures   int64
	}{
		{"first answer then one added", 128, []step{
			{got: three, changed: true, cur: three},
			{got: three, cur: three},
			{got: four, changed: true, cur: four},
		}, 0, 0},
		{"failures and empty keep the set", 128, []step{
			{got: three, changed: true, cur: three},
			{err: fail, cur: three},
			{err: fmt.Errorf("%w: NXDOMAIN", errEmpty), cur: three},
			{got: three, cur: three},
		}, 0, 2},
		{"failure before any answer", 128, []step{
			{err: fail, cur: nil},
			{got: three, changed: true, cur: three},
		}, 0, 1},
		{"big change held until it repeats", 128, []step{
			{got: three, changed: true, cur: three},
			{got: swapped, cur: three, holding: true},
			{got: swapped, changed: true, cur: swapped},
		}, 1, 0},
		{"held answer dropped when the old one comes back", 128, []step{
			{got: three, changed: true, cur: three},
			{got: swapped, cur: three, holding: true},
			{got: three, cur: three},
			{got: swapped, cur: three, holding: true},
		}, 2, 0},
		{"a different big answer is held anew", 128, []step{
			{got: three, changed: true, cur: three},
			{got: swapped, cur: three, holding: true},
			{got: servers(t, 7, 8, 9), cur: three, holding: true},
			{got: servers(t, 7, 8, 9), changed: true, cur: servers(t, 7, 8, 9)},
		}, 2, 0},
		{"over max_servers held, even first", 3, []step{
			{got: four, cur: nil, holding: true},
			{got: four, changed: true, cur: four},
		}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWatcher(0.5, tt.maxServers)
			for i, s := range tt.steps {
				changed := w.observe(s.got, s.err, now)
				if changed {
					w.current() // the caller applies it
				}
				st := w.stats()
				if changed != s.changed || !sameServers(w.cur, s.cur) || st.Holding != s.holding {
					t.Fatalf("step %d: changed %v, cur %v, holding %v; want %v, %v, %v", i, changed, w.cur, st.Holding, s.changed, s.cur, s.holding)
				}
			}
			st := w.stats()
			if st.Held != tt.held || st.Failures != tt.failures || st.Resolutions != int64(len(tt.steps)) {
				t.Errorf("stats %+v, want held %d failures %d", st, tt.held, tt.failures)
			}
		})
	}
}

// The share of a change counts a readdressed server once, over the
// larger set.
func TestChangeShare(t *testing.T) {
	tests := []struct {
		name     string
		from, to []config.Server
		held     bool
	}{
		{"one added to one", servers(t, 1), servers(t, 1, 2), false},
		{"one readdressed of three", servers(t, 1, 2, 3), servers(t, 1, 2, 9), false},
		{"two readdressed of three", servers(t, 1, 2, 3), servers(t, 2, 1, 3), true},
		{"two removed of four", servers(t, 1, 2, 3, 4), servers(t, 1, 2), false},
		{"three removed of four", servers(t, 1, 2, 3, 4), servers(t, 1), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := testWatcher(0.5, 128)
			w.cur = tt.from
			if held := w.tooMuch(tt.to) != ""; held != tt.held {
				t.Errorf("held %v, want %v (%s)", held, tt.held, w.tooMuch(tt.to))
			}
		})
	}
}

// Resolve hands out a copy and changed() fires only for a set not handed
// out yet.
func TestChangedOnlyForNewSet(t *testing.T) {
	w := testWatcher(1, 128)
	now := time.Unix(1, 0)
	w.observe(servers(t, 1, 2), nil, now)
	got := w.current()
	got[0].Addr = "changed"
	if w.cur[0].Addr == "changed" {
		t.Fatal("current is not a copy")
	}
	if w.observe(servers(t, 1, 3), nil, now) != true {
		t.Error("a new set is a change")
	}
	if w.observe(servers(t, 1, 2), nil, now) != false {
		t.Error("going back to the set handed out is no change")
	}
}
