package spool

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// open opens a spool at path, failing the test on error, and closes it
// at the end.
func open(t *testing.T, cfg Config) *Spool {
	t.Helper()
	s, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// replayAll replays server's keys into a slice, every one answered.
func replayAll(t *testing.T, s *Spool, server string) []string {
	t.Helper()
	var got []string
	err := s.Replay(server, func(keys [][]byte) (int, error) {
		for _, k := range keys {
			got = append(got, string(k))
		}
		return len(keys), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAppendReplayOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool")
	s := open(t, Config{Path: path})
	for _, k := range []string{"a", "b", "a", "c"} {
		if !s.Append("s1", []byte(k)) {
			t.Fatalf("append %s refused", k)
		}
	}
	s.Append("s2", []byte("x"))
	if st := s.Stats(); st.Pending != 4 || st.Spooled != 5 {
		t.Fatalf("stats %+v, want 4 pending (a covered once), 5 spooled", st)
	}
	if got := replayAll(t, s, "s1"); !equal(got, "a", "b", "c") {
		t.Fatalf("replayed %v", got)
	}
	if got := replayAll(t, s, "s1"); len(got) != 0 {
		t.Fatalf("replayed again %v", got)
	}
	if st := s.Stats(); st.Pending != 1 || st.Replayed != 3 {
		t.Fatalf("stats %+v", st)
	}
}

func equal(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// TestReopen: pending keys survive a close and open; replayed ones do not
// come back, and a failed replay keeps the key and the ones after it.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool")
	s, err := Open(Config{Path: path, Fsync: FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		s.Append("s1", []byte(k))
	}
	s.Append("s2", []byte("other"))
	err = s.Replay("s1", func(keys [][]byte) (int, error) { return 1, errors.New("down") })
	if err == nil || s.Stats().ReplayFailed != 3 {
		t.Fatalf("replay err %v, stats %+v", err, s.Stats())
	}
	s.Close()
	s = open(t, Config{Path: path})
	if got := replayAll(t, s, "s1"); !equal(got, "k2", "k3", "k4") {
		t.Fatalf("after reopen replayed %v", got)
	}
	if got := replayAll(t, s, "s2"); !equal(got, "other") {
		t.Fatalf("s2 replayed %v", got)
	}
	if fi, _ := os.Stat(path); fi.Size() != int64(len(Magic)) {
		t.Fatalf("file of %d bytes once nothing is pending, want the magic alone", fi.Size())
	}
}

// TestTailCut: a file cut inside its last record, or with garbage after
// it, keeps every whole record before, counts the cut and truncates.
func TestTailCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-3] }},
		{"corrupt", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }},
		{"garbage", func(b []byte) []byte { return append(b, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "spool")
			s, _ := Open(Config{Path: path})
			for _, k := range []string{"a", "b", "c"} {
				s.Append("s1", []byte(k))
			}
			s.Close()
			b, _ := os.ReadFile(path)
			os.WriteFile(path, tc.mod(b), 0o600)
			s = open(t, Config{Path: path})
			want := []string{"a", "b"}
			if tc.name == "garbage" {
				want = append(want, "c")
			}
			if s.Stats().CorruptTailCut != 1 {
				t.Fatalf("cut not counted: %+v", s.Stats())
			}
			if got := replayAll(t, s, "s1"); !equal(got, want...) {
				t.Fatalf("replayed %v, want %v", got, want)
			}
		})
	}
}

func TestNotASpool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool")
	os.WriteFile(path, []byte("hello world, not ours"), 0o600)
	if _, err := Open(Config{Path: path}); err == nil {
		t.Fatal("opened a file that is not a spool")
	}
	if b, _ := os.ReadFile(path); string(b) != "hello world, not ours" {
		t.Fatal("a refused file was changed")
	}
}

// TestBound: past MaxBytes new deletes are dropped and counted; a replay
// frees room, and compaction lets appends in again.
func TestBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spool")
	s := open(t, Config{Path: path, MaxBytes: 200, Fsync: FsyncNever})
	taken := 0
	for i := range 50 {
		if s.Append("s1", []byte{'k', byte('0' + i/10), byte('0' + i%10)}) {
			taken++
		}
	}
	st := s.Stats()
	if taken == 0 || taken == 50 || st.DroppedAtBound != int64(50-taken) || st.Pending != int64(taken) {
		t.Fatalf("taken %d, stats %+v", taken, st)
	}
	if fi, _ := os.Stat(path); fi.Size() > 200 {
		t.Fatalf("file of %d bytes past the bound", fi.Size())
	}
	replayAll(t, s, "s1")
	if !s.Append("s1", []byte("again")) {
		t.Fatal("append refused after the replay emptied the spool")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Op: OpDelete, Server: "mc1", Key: []byte("key")},
		{Op: OpDone, Server: "127.0.0.1:11211:1", Count: 7},
		{Op: OpDelete, Server: "", Key: []byte{0, 1, 2}},
	} {
		b := AppendRecord(nil, r)
		got, n, err := ReadRecord(b)
		if err != nil || n != len(b) || got.Op != r.Op || got.Server != r.Server ||
			!bytes.Equal(got.Key, r.Key) || got.Count != r.Count {
			t.Fatalf("%+v read back as %+v, %d, %v", r, got, n, err)
		}
		for i := range len(b) {
			if _, _, err := ReadRecord(b[:i]); !errors.Is(err, ErrShort) {
				t.Fatalf("prefix of %d bytes: %v, want ErrShort", i, err)
			}
		}
	}
}
