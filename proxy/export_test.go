package proxy

import "time"

// FinCheck is finCheck, for tests.
const FinCheck = finCheck

// KeptPendings returns how many written pendings the writers of the open
// sessions keep for their readers (see newPending), and whether any says
// it keeps some: for tests.
func (s *Server) KeptPendings() (kept int, stocked bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sess := range s.sessions {
		sess.w.mu.Lock()
		kept += len(sess.w.freed)
		stocked = stocked || sess.w.stocked.Load()
		sess.w.mu.Unlock()
	}
	return kept, stocked
}

// SetLingerTracking sets how long a tracker keeps its connections after
// its last client; the returned func restores it.
func SetLingerTracking(d time.Duration) func() {
	was := lingerTracking
	lingerTracking = d
	return func() { lingerTracking = was }
}
