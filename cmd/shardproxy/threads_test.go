package main

import "testing"

func TestThreadsDefault(t *testing.T) {
	for _, tt := range []struct {
		flag    int
		fromEnv bool
		cores   int
		want    int
	}{
		{0, false, 1, 1},
		{0, false, 2, 1},
		{0, false, 3, 1},
		{0, false, 4, 2},
		{0, false, 64, 32},
		{0, true, 2, 2}, // GOMAXPROCS=2 in the environment
		{3, false, 2, 3},
		{3, true, 8, 3},
	} {
		if got := threads(tt.flag, tt.fromEnv, tt.cores); got != tt.want {
			t.Errorf("threads(%d, %v, %d) = %d, want %d", tt.flag, tt.fromEnv, tt.cores, got, tt.want)
		}
	}
}
