package dnspool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"shardproxy/config"
)

// Stats are one pool's DNS figures.
type Stats struct {
	Pool string
	// Name is the name asked for, Type its record type.
	Name, Type string
	// Resolutions counts the answers asked for; Failures those that
	// failed or were empty (the last good set was kept); Held the answers
	// held for changing too much at once or listing too many servers;
	// Changes the sets applied (the first one included).
	Resolutions, Failures, Held, Changes int64
	// Servers is the size of the set in use (0 before the first answer).
	Servers int
	// LastChange is when the set in use was applied; zero before.
	LastChange time.Time
	// LastError is the last failure's message, "" when there was none.
	LastError string
	// Failing reports whether the last resolution failed.
	Failing bool
	// Holding reports whether an answer is held, waiting to repeat.
	Holding bool
}

// watcher resolves one pool's servers_from every interval.
type watcher struct {
	pool string
	sf   config.ServersFrom
	res  *resolver
	log  *slog.Logger
	// changed is called, from the watcher's goroutine, when the set in
	// use is no longer the one last handed out (served).
	changed func(pool string)

	mu      sync.Mutex
	cur     []config.Server // the set in use; nil before the first good answer
	pending []config.Server // an answer held until it repeats
	served  []config.Server // the set Resolve last handed out
	st      Stats

	ready chan struct{} // closed at the first good answer or when the start wait ends
	once  sync.Once
	stop  chan struct{}
	done  chan struct{}
}

func newWatcher(pool string, sf *config.ServersFrom, log *slog.Logger, changed func(string)) (*watcher, error) {
	res, err := newResolver(sf.Resolver, queryTimeout(sf.Interval))
	if err != nil {
		return nil, err
	}
	return &watcher{
		pool: pool, sf: *sf, res: res, log: log.With("pool", pool, "dns", sf.DNS, "type", sf.Type), changed: changed,
		st:    Stats{Pool: pool, Name: sf.DNS, Type: sf.Type},
		ready: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// run resolves now and then every interval until close; the start wait
// ends ready after wait even without an answer.
func (w *watcher) run(wait time.Duration) {
	defer close(w.done)
	startWait := time.AfterFunc(wait, w.setReady)
	defer startWait.Stop()
	t := time.NewTicker(w.sf.Interval)
	defer t.Stop()
	for {
		servers, err := w.res.lookup(&w.sf)
		if w.observe(servers, err, time.Now()) {
			w.changed(w.pool)
		}
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
	}
}

func (w *watcher) setReady() { w.once.Do(func() { close(w.ready) }) }

// close stops the watcher and waits for its goroutine.
func (w *watcher) close() {
	close(w.stop)
	<-w.done
	w.setReady()
}

// observe takes one resolution's outcome through the guards and reports
// whether the set in use changed from the one last handed out.
func (w *watcher) observe(got []config.Server, err error, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.st.Resolutions++
	if err != nil {
		w.fail(err)
		return false
	}
	if w.st.Failing {
		w.st.Failing = false
		w.log.Info("dns answers again", "servers", len(got))
	}
	if sameServers(got, w.cur) {
		w.pending = nil
		w.st.Holding = false
		return false
	}
	if why := w.tooMuch(got); why != "" {
		if !sameServers(got, w.pending) {
			w.pending = got
			w.st.Held++
			w.st.Holding = true
			w.log.Warn("dns answer held until it repeats", "why", why, "servers", len(got), "running", len(w.cur))
			return false
		}
		w.log.Info("held dns answer repeated, applying it", "why", why)
	}
	// A Resolve still waiting for the first answer takes this one itself.
	waiting := !isClosed(w.ready)
	w.apply(got, now)
	return !waiting && !sameServers(w.cur, w.served)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// fail counts a failed or empty answer; the set in use stays. It logs
// when the watcher starts failing (messages differ from one try to the
// next, by a socket's port, so a change of message is no change of state).
func (w *watcher) fail(err error) {
	w.st.Failures++
	if !w.st.Failing {
		level := slog.LevelWarn
		if errors.Is(err, errEmpty) {
			level = slog.LevelError
		}
		w.log.Log(context.Background(), level, "dns answer refused, servers kept", "err", err, "servers", len(w.cur))
	}
	w.st.Failing = true
	w.st.LastError = err.Error()
}

// apply makes got the set in use.
func (w *watcher) apply(got []config.Server, now time.Time) {
	added, removed := diff(w.cur, got)
	w.log.Info("dns servers changed", "servers", len(got), "added", added, "removed", removed)
	w.cur, w.pending = got, nil
	w.st.Holding = false
	w.st.Changes++
	w.st.Servers = len(got)
	w.st.LastChange = now
	w.setReady()
}

// tooMuch says why got is held, or "": more servers than max_servers, or
// a change of more than max_change of the servers (added, removed and
// readdressed, over the larger of the two sets) from the set in use.
func (w *watcher) tooMuch(got []config.Server) string {
	if len(got) > w.sf.MaxServers {
		return fmt.Sprintf("%d servers, over max_servers %d", len(got), w.sf.MaxServers)
	}
	if w.cur == nil {
		return ""
	}
	changed := changes(w.cur, got)
	if share := float64(changed) / float64(max(len(w.cur), len(got))); share > w.sf.MaxChange {
		return fmt.Sprintf("changes %d of %d servers, over max_change %g", changed, max(len(w.cur), len(got)), w.sf.MaxChange)
	}
	return ""
}

// current returns a copy of the set in use (nil before the first answer)
// and records it as handed out.
func (w *watcher) current() []config.Server {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.served = w.cur
	return slices.Clone(w.cur)
}

func (w *watcher) stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// diff returns the servers of b not in a and of a not in b, as
// "name=addr": a readdressed server is in both.
func diff(a, b []config.Server) (added, removed []string) {
	key := func(s config.Server) string { return s.Name + "=" + s.Addr }
	in := func(set []config.Server, s config.Server) bool {
		return slices.ContainsFunc(set, func(o config.Server) bool { return o.Name == s.Name && o.Addr == s.Addr })
	}
	for _, s := range b {
		if !in(a, s) {
			added = append(added, key(s))
		}
	}
	for _, s := range a {
		if !in(b, s) {
			removed = append(removed, key(s))
		}
	}
	return added, removed
}

// changes counts the servers added, removed or readdressed from a to b,
// by name.
func changes(a, b []config.Server) int {
	addr := make(map[string]string, len(a))
	for _, s := range a {
		addr[s.Name] = s.Addr
	}
	n := 0
	for _, s := range b {
		if old, ok := addr[s.Name]; !ok || old != s.Addr {
			n++
		}
		delete(addr, s.Name)
	}
	return n + len(addr)
}

// sameServers reports whether a and b (both sorted by name) are the same
// set; nil is no set, unlike an empty one.
func sameServers(a, b []config.Server) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Addr != b[i].Addr || a[i].Weight != b[i].Weight {
			return false
		}
	}
	return true
}
