package testserver

import (
	"testing"
	"time"
)

// TestEtcdCluster starts three members, kills one (the others keep a
// quorum and stay healthy), brings it back and waits for it to rejoin.
func TestEtcdCluster(t *testing.T) {
	c := StartEtcd(t, 3)
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("endpoints = %d, want 3", got)
	}
	c.Members[0].Stop()
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("two of three members: %v", err)
	}
	c.Members[0].Restart()
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := etcdHealthy(c.Members[0].Addr); err != nil {
		t.Fatalf("restarted member: %v", err)
	}
}
