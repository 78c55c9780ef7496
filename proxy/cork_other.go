//go:build !linux

package proxy

// corkFD does nothing where there is no TCP_CORK: the last replies leave
// as they are written and the FIN after them, in a segment of its own.
func corkFD(uintptr) {}
