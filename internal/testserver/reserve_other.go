//go:build !unix

package testserver

// reserve has no shared claim outside Unix; the in-process record and the
// Start functions' retry on a taken port remain.
func reserve(port int) bool { return true }
