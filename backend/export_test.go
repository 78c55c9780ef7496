package backend

import "testing"

// SetTestHookDisconnected has f run when a socket's reader finds the
// server's close, before the socket dies, for the rest of t.
func SetTestHookDisconnected(t *testing.T, f func()) {
	testHookDisconnected = f
	t.Cleanup(func() { testHookDisconnected = nil })
}
