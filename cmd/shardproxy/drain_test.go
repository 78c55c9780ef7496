package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/testserver"
)

// sentLoad is verified traffic, memcache or Redis, that keeps for each
// request when it was sent: each worker sets its own keys and gets each
// back (the value just set), until its connection ends. A request sent
// before a time T must be answered right; after T only the end of the
// connection (EOF or reset, no reply) is allowed.
type sentLoad struct {
	mu      sync.Mutex
	results []sent
	wg      sync.WaitGroup
}

// sent is one request's outcome.
type sent struct {
	at   time.Time
	req  string
	ok   bool   // answered right
	ends bool   // the connection ended without a reply
	what string // otherwise, what came back
}

// sentProto is how a sentLoad worker writes a key and reads it back: the
// request's bytes and the reply it wants.
type sentProto struct {
	set, get func(key, val string) (req, want string)
}

var (
	memcacheSent = sentProto{
		set: func(k, v string) (string, string) {
			return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v), "STORED\r\n"
		},
		get: func(k, v string) (string, string) {
			return "get " + k + "\r\n", fmt.Sprintf("VALUE %s 0 %d\r\n%s\r\nEND\r\n", k, len(v), v)
		},
	}
	redisSent = sentProto{
		set: func(k, v string) (string, string) {
			return fmt.Sprintf("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v), "+OK\r\n"
		},
		get: func(k, v string) (string, string) {
			return fmt.Sprintf("*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(k), k), fmt.Sprintf("$%d\r\n%s\r\n", len(v), v)
		},
	}
)

// startSentLoad starts workers clients of p on addr, their keys named
// name0-k.., name1-k...
func startSentLoad(addr string, p sentProto, workers int, name string) *sentLoad {
	l := &sentLoad{}
	l.add(addr, p, workers, name)
	return l
}

// add starts more workers.
func (l *sentLoad) add(addr string, p sentProto, workers int, name string) {
	for w := range workers {
		l.wg.Add(1)
		go l.worker(addr, p, name+strconv.Itoa(w))
	}
}

func (l *sentLoad) note(s sent) {
	l.mu.Lock()
	l.results = append(l.results, s)
	l.mu.Unlock()
}

func (l *sentLoad) worker(addr string, p sentProto, w string) {
	defer l.wg.Done()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		l.note(sent{at: time.Now(), req: "dial", what: err.Error()})
		return
	}
	defer nc.Close()
	for seq := 0; ; seq++ {
		key := fmt.Sprintf("%s-k%d", w, seq%100)
		val := key + ":" + strconv.Itoa(seq)
		for _, op := range []func(k, v string) (string, string){p.set, p.get} {
			req, want := op(key, val)
			s := sent{at: time.Now(), req: strings.TrimSpace(req)}
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			_, err := io.WriteString(nc, req)
			got := make([]byte, len(want))
			n := 0
			if err == nil {
				n, err = io.ReadFull(nc, got)
			}
			switch {
			case err != nil && n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)):
				s.ends = true
			case err != nil:
				s.what = fmt.Sprintf("%q %v", got[:n], err)
			default:
				s.ok, s.what = string(got) == want, string(got)
			}
			l.note(s)
			if !s.ok {
				return
			}
		}
	}
}

// check waits for the workers and fails for a request sent before t that
// was not answered right, and for any after it that got something other
// than its right reply or the connection's end. It returns the requests
// sent before t and those after it that ended with the connection.
func (l *sentLoad) check(t *testing.T, fail func(string, ...any), before time.Time) (answered, ended int) {
	t.Helper()
	l.wg.Wait()
	for _, s := range l.results {
		switch {
		case s.at.Before(before) && !s.ok:
			fail("%s sent before SIGTERM: %s (connection ended: %v)", s.req, s.what, s.ends)
		case s.at.Before(before):
			answered++
		case s.ends:
			ended++
		case !s.ok:
			fail("%s sent after SIGTERM: %s", s.req, s.what)
		}
	}
	return answered, ended
}

// TestSIGTERMUnderLoad sends SIGTERM to the binary while 50 memcache and
// 50 Redis clients keep requests in flight (their replies delayed at the
// servers) and one
// client's request is stuck (its reply held): every request sent before
// the signal is answered right, each connection then ends without a wrong
// reply, new connections are refused while the drain runs, the stuck
// request is cut at --shutdown-timeout and counted, and the process exits
// within that deadline.
func TestSIGTERMUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	const deadline = 2 * time.Second
	bin := testserver.Shardproxy(t)
	slow := faultproxy.New(t, testserver.StartMemcached(t).Addr)
	slow.Latency(faultproxy.Downstream, 20*time.Millisecond, 0)
	slowRedis := faultproxy.New(t, testserver.StartRedis(t).Addr)
	slowRedis.Latency(faultproxy.Downstream, 20*time.Millisecond, 0)
	stuck := faultproxy.New(t, testserver.StartMemcached(t).Addr)
	listen, redisListen, stuckListen, adminAddr := loopback(t), loopback(t), loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	yaml := fmt.Sprintf("mc:\n  listen: %s\n  timeout: 30000\n  servers:\n    - %s:1\n"+
		"rd:\n  listen: %s\n  redis: true\n  timeout: 30000\n  servers:\n    - %s:1\n"+
		"stuck:\n  listen: %s\n  timeout: 30000\n  servers:\n    - %s:1\n",
		listen, slow.Addr(), redisListen, slowRedis.Addr(), stuckListen, stuck.Addr())
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, logs, fail := startProxy(t, bin, "-c", conf, "-s", strconv.Itoa(testserver.FreePort(t)), "-a", "127.0.0.1",
		"--admin", adminAddr, "--shutdown-timeout", deadline.String())
	waitFor(t, fail, "ready", func() bool { return getStatus(adminAddr, "/ready") == 200 })

	sc, err := dialMC(stuckListen)
	if err != nil {
		fail("dial: %v", err)
	}
	defer sc.nc.Close()
	if line, _, err := sc.do("set s 0 0 1\r\nx\r\n"); line != "STORED\r\n" {
		fail("set through the stuck pool: %q %v", line, err)
	}
	stuck.Hold(faultproxy.Downstream, true)
	sc.nc.Write([]byte("get s\r\n"))

	load := startSentLoad(listen, memcacheSent, 50, "m")
	load.add(redisListen, redisSent, 50, "r")
	time.Sleep(500 * time.Millisecond) // under load
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	sigAt := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)

	for _, addr := range []string{listen, redisListen} {
		waitFor(t, fail, "new connections refused", func() bool {
			nc, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				nc.Close()
			}
			return err != nil
		})
	}
	select {
	case err := <-exited:
		fail("exited (%v) before new connections were refused", err)
	default:
	}
	select {
	case err := <-exited:
		if err != nil {
			fail("exit: %v", err)
		}
	case <-time.After(deadline + 5*time.Second):
		fail("still running %v after SIGTERM with --shutdown-timeout %v", time.Since(sigAt), deadline)
	}
	took := time.Since(sigAt)
	answered, ended := load.check(t, fail, sigAt)
	if answered < 100 {
		fail("only %d requests before SIGTERM", answered)
	}
	sc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(sc.r); len(b) != 0 {
		fail("the stuck request got %q (%v), want its connection cut", b, err)
	}
	m := regexp.MustCompile(`msg=drained connections=(\d+) drained=(\d+) handed=0 cut=(\d+) requests=(\d+) requests_cut=(\d+) took=(\S+)`).
		FindStringSubmatch(logs.String())
	// A dial that checks for refusal may land before the drain began: a
	// connection more, idle, drained.
	if m == nil || m[3] != "1" || m[5] != "1" || atoi(m[1]) < 101 || atoi(m[2]) != atoi(m[1])-1 {
		fail("want a drain line with at least 101 connections, all drained but 1 cut with its request: %q", m)
	}
	t.Logf("exit %v after SIGTERM (deadline %v); drain: %s connections, %s drained, %s cut, %s requests answered, %s cut, took %s; "+
		"%d requests sent before SIGTERM all answered, %d sent after it met their connection's end",
		took, deadline, m[1], m[2], m[3], m[4], m[5], m[6], answered, ended)
}

// getStatus returns the status of GET path on the HTTP admin at addr, 0
// when it cannot be reached.
func getStatus(addr, path string) int {
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestDrainByHTTP drains the binary with POST /drain: it answers 202,
// /ready turns to 503 "draining" while a request is in flight, the
// request is answered, and the process exits 0 as after SIGTERM.
func TestDrainByHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	bin := testserver.Shardproxy(t)
	fp := faultproxy.New(t, testserver.StartMemcached(t).Addr)
	listen, adminAddr := loopback(t), loopback(t)
	conf := filepath.Join(t.TempDir(), "conf.yml")
	if err := os.WriteFile(conf, []byte(proxyConf(listen, fp.Addr(), "30000", adminAddr, loopback(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, logs, fail := startProxy(t, bin, "-c", conf)
	waitFor(t, fail, "ready", func() bool { return getStatus(adminAddr, "/ready") == 200 })
	c, err := dialMC(listen)
	if err != nil {
		fail("dial: %v", err)
	}
	if line, _, err := c.do("set k 0 0 1\r\nv\r\n"); line != "STORED\r\n" {
		fail("set: %q %v", line, err)
	}
	fp.Hold(faultproxy.Downstream, true)
	c.nc.Write([]byte("get k\r\n"))
	resp, err := client.Post("http://"+adminAddr+"/drain", "", nil)
	if err != nil || resp.StatusCode != 202 {
		fail("POST /drain: %v %v", resp, err)
	}
	resp.Body.Close()
	waitFor(t, fail, "draining", func() bool { return getStatus(adminAddr, "/ready") == 503 })
	fp.Hold(faultproxy.Downstream, false)
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := c.r.ReadString('\n'); line != "VALUE k 0 1\r\n" {
		fail("the get in flight: %q %v", line, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			fail("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		fail("still running after POST /drain")
	}
	if !strings.Contains(logs.String(), `msg="shutting down" trigger=http`) {
		fail("no shutdown line for POST /drain")
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
