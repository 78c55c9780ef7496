package kind

import "shardproxy/backend"

// RunScript counts a script sent to b on a dedicated connection until
// done is called, once its reply (or failure) is in: while it runs, a
// client's PING goes to b (ScriptServer), which answers -BUSY once the
// script has run past its busy-reply-threshold, as Redis answers its own
// clients.
func (dp *DedicatedPool) RunScript(b *backend.Backend) (done func()) {
	dp.mu.Lock()
	dp.scripts[b]++
	dp.mu.Unlock()
	dp.running.Add(1)
	return func() {
		dp.running.Add(-1)
		dp.mu.Lock()
		if dp.scripts[b]--; dp.scripts[b] <= 0 {
			delete(dp.scripts, b)
		}
		dp.mu.Unlock()
	}
}

// ScriptServer returns a server running a script sent by RunScript, nil
// when none is: one atomic load then.
func (dp *DedicatedPool) ScriptServer() *backend.Backend {
	if dp.running.Load() == 0 {
		return nil
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for b := range dp.scripts {
		return b
	}
	return nil
}
