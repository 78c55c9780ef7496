package combine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/proxy"
)

// verified is a memcache load whose every reply is checked against a
// model of what each key must hold. Each key belongs to one worker, which
// sends one request at a time, so the model is exact: a key holds the
// value of the last acknowledged set, or nothing after an acknowledged
// delete, until its TTL ends. A get may miss (it is a cache: a key that
// moved, an eviction); a get that hits must return the key's value, or
// the value of a write that was answered with an error (such a write may
// or may not have been applied), and never after the TTL ended (2 s of
// slack: memcached's clock ticks in seconds, and a fill carries the TTL
// left in whole seconds). Anything else is a stale read.
type verified struct {
	t       testing.TB
	addr    string
	dial    func(addr string) (store, error)
	workers int
	keys    int

	gets, hits, misses, lost, sets, deletes, errs, stale, expired atomic.Int64

	mu    sync.Mutex
	first []string
}

// lost counts the misses of keys the model says hold a value: what a
// migration costs the clients.

// keyState is the model of one key.
type keyState struct {
	val     string
	has     bool
	expires time.Time // zero: never
	maybe   []string  // values of writes answered with an error since the last acknowledged one
}

type loadCounts struct{ gets, hits, misses, lost, errs, stale, expired int64 }

func (v *verified) counts() loadCounts {
	return loadCounts{v.gets.Load(), v.hits.Load(), v.misses.Load(), v.lost.Load(), v.errs.Load(), v.stale.Load(), v.expired.Load()}
}

func (c loadCounts) minus(o loadCounts) loadCounts {
	return loadCounts{c.gets - o.gets, c.hits - o.hits, c.misses - o.misses, c.lost - o.lost, c.errs - o.errs, c.stale - o.stale, c.expired - o.expired}
}

// lostRate is the share of gets of a key with a value that missed.
func (c loadCounts) lostRate() float64 {
	if c.lost+c.hits == 0 {
		return 0
	}
	return float64(c.lost) / float64(c.lost+c.hits)
}

func (v *verified) report(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.first) < 10 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

// run starts the workers; they stop when ctx ends, and wait returns once
// they have.
func (v *verified) run(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	for w := range v.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v.worker(ctx, w)
		}()
	}
	return wg.Wait
}

// store is a client of the proxy for the load: one request at a time.
type store interface {
	// get returns the key's value; hit false on a miss. An error reply
	// is errReply; any other error ends the worker.
	get(key string) (val string, hit bool, err error)
	// set stores val for ttl seconds (0: no TTL); errReply when refused.
	set(key, val string, ttl int) error
	// del deletes the key; errReply when refused.
	del(key string) error
	close()
}

// errReply is an error the server or proxy answered.
type errReply struct{ text string }

func (e *errReply) Error() string { return e.text }

func (v *verified) worker(ctx context.Context, w int) {
	c, err := v.dial(v.addr)
	if err != nil {
		v.report("worker %d: dial: %v", w, err)
		v.errs.Add(1)
		return
	}
	defer c.close()
	model := make([]keyState, v.keys)
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	for seq := 0; ctx.Err() == nil; seq++ {
		k := rng.IntN(v.keys)
		key := fmt.Sprintf("v:%d:%d", w, k)
		st := &model[k]
		var err error
		switch p := rng.IntN(100); {
		case p < 60:
			err = v.get(c, key, st)
		case p < 88:
			ttl := 0
			if p >= 82 {
				ttl = 1 + rng.IntN(3)
			}
			err = v.set(c, key, fmt.Sprintf("w%d.%d", w, seq), ttl, st)
		default:
			err = v.del(c, key, st)
		}
		if err != nil {
			v.report("worker %d: %v", w, err)
			v.errs.Add(1)
			return
		}
	}
}

// replied sorts err: nil for an error reply (counted, reported), else err.
func (v *verified) replied(err error, what string) error {
	var er *errReply
	if errors.As(err, &er) {
		v.errs.Add(1)
		v.report("%s: %s", what, er.text)
		return nil
	}
	return err
}

func (v *verified) get(c store, key string, st *keyState) error {
	v.gets.Add(1)
	got, hit, err := c.get(key)
	if err != nil {
		return v.replied(err, "get "+key)
	}
	now := time.Now()
	// live: a value the key must hold now, not one within a second of
	// its end (memcached's clock ticks in seconds)
	live := st.has && (st.expires.IsZero() || now.Before(st.expires.Add(-time.Second)))
	if !hit {
		v.misses.Add(1)
		if live && len(st.maybe) == 0 {
			v.lost.Add(1)
		}
		return nil
	}
	v.hits.Add(1)
	switch {
	case got == st.val && st.has && (st.expires.IsZero() || now.Before(st.expires.Add(2*time.Second))):
	case contains(st.maybe, got):
	case got == st.val && st.has:
		v.expired.Add(1)
		v.report("get %s: %q served %v after its TTL", key, got, now.Sub(st.expires))
	default:
		v.stale.Add(1)
		v.report("get %s: stale %q; model %+v", key, got, *st)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (v *verified) set(c store, key, val string, ttl int, st *keyState) error {
	v.sets.Add(1)
	if err := c.set(key, val, ttl); err != nil {
		st.maybe = append(st.maybe, val)
		return v.replied(err, "set "+key)
	}
	*st = keyState{val: val, has: true}
	if ttl > 0 {
		st.expires = time.Now().Add(time.Duration(ttl) * time.Second)
	}
	return nil
}

func (v *verified) del(c store, key string, st *keyState) error {
	v.deletes.Add(1)
	if err := c.del(key); err != nil {
		if st.has {
			st.maybe = append(st.maybe, st.val)
		}
		st.has = false
		return v.replied(err, "delete "+key)
	}
	*st = keyState{}
	return nil
}

// mcStore is a memcache text client.
type mcStore struct {
	nc net.Conn
	r  *bufio.Reader
}

func dialMemcache(addr string) (store, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &mcStore{nc: nc, r: bufio.NewReader(nc)}, nil
}

func (c *mcStore) close() { c.nc.Close() }

// line sends req and reads a reply line.
func (c *mcStore) line(req string) (string, error) {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, req); err != nil {
		return "", err
	}
	return c.r.ReadString('\n')
}

func (c *mcStore) get(key string) (string, bool, error) {
	line, err := c.line("get " + key + "\r\n")
	switch {
	case err != nil:
		return "", false, err
	case line == "END\r\n":
		return "", false, nil
	case !strings.HasPrefix(line, "VALUE "):
		return "", false, &errReply{line}
	}
	var k string
	var flags, n int
	if _, err := fmt.Sscanf(line, "VALUE %s %d %d", &k, &flags, &n); err != nil {
		return "", false, fmt.Errorf("get %s: %q", key, line)
	}
	body := make([]byte, n+2+len("END\r\n"))
	if _, err := io.ReadFull(c.r, body); err != nil {
		return "", false, err
	}
	return string(body[:n]), true, nil
}

func (c *mcStore) set(key, val string, ttl int) error {
	line, err := c.line(fmt.Sprintf("set %s 0 %d %d\r\n%s\r\n", key, ttl, len(val), val))
	if err == nil && line != "STORED\r\n" {
		err = &errReply{line}
	}
	return err
}

func (c *mcStore) del(key string) error {
	line, err := c.line("delete " + key + "\r\n")
	if err == nil && line != "DELETED\r\n" && line != "NOT_FOUND\r\n" {
		err = &errReply{line}
	}
	return err
}

// startProxy runs an in-process proxy for text until the test ends.
func startProxy(t testing.TB, text string) *proxy.Server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := proxy.New(parse(t, text), proxy.Options{Logger: log, DrainTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return srv
}

func parse(t testing.TB, text string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(text), "test.yml")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return c
}

// routerStat returns the counter name of pool's router.
func routerStat(srv *proxy.Server, pool, name string) int64 {
	for _, p := range srv.Stats().Pools {
		if p.Name != pool {
			continue
		}
		for _, s := range p.Router {
			if s.Name == name {
				return s.Value
			}
		}
	}
	return -1
}

// conn is a plain memcache text client, one request at a time.
type conn struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialServer(t testing.TB, addr string) *conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &conn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// do sends req and returns its reply: a line, a get's VALUE lines
// (stats' STAT lines) to END, or a meta get's VA line and value.
func (c *conn) do(req string) string {
	c.t.Helper()
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, req); err != nil {
		c.t.Fatal(err)
	}
	var out strings.Builder
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			c.t.Fatalf("%q: %v", req, err)
		}
		out.WriteString(line)
		if strings.HasPrefix(line, "STAT ") {
			continue
		}
		if strings.HasPrefix(line, "VA ") { // a meta get's value
			var n int
			fmt.Sscanf(line, "VA %d", &n)
			body := make([]byte, n+2)
			if _, err := io.ReadFull(c.r, body); err != nil {
				c.t.Fatal(err)
			}
			out.Write(body)
			return out.String()
		}
		if !strings.HasPrefix(line, "VALUE ") {
			return out.String()
		}
		var k string
		var flags, n int
		fmt.Sscanf(line, "VALUE %s %d %d", &k, &flags, &n)
		body := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, body); err != nil {
			c.t.Fatal(err)
		}
		out.Write(body)
	}
}
