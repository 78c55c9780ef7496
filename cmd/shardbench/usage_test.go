package main

import (
	"os"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and a ')' in it; utime 250, stime 50.
	stat := "4242 (evil) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 3 0 100 1000 200\n"
	got, err := parseStatCPU([]byte(stat))
	if err != nil || got != 3*time.Second {
		t.Fatalf("parseStatCPU = %v, %v; want 3s", got, err)
	}
	if _, err := parseStatCPU([]byte("1 (x) S 1 2")); err == nil {
		t.Error("parseStatCPU of a short line: no error")
	}
}

func TestProcCPUSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	if _, err := procCPU(os.Getpid()); err != nil {
		t.Fatalf("procCPU(self): %v", err)
	}
}
