package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// verifiedLoad runs memcache clients against proxies, each on one
// connection it keeps: set a key whose value names the key, get it back,
// and check every reply. A reply that is not the request's own is wrong;
// a connection that breaks is dropped.
type verifiedLoad struct {
	ok, misses, serverErrs, wrong, dropped atomic.Int64
	stop                                   chan struct{}
	wg                                     sync.WaitGroup
	mu                                     sync.Mutex
	firstWrong                             string
}

// startLoad runs perAddr clients on each of addrs until stop.
func startLoad(t *testing.T, addrs []string, perAddr int) *verifiedLoad {
	t.Helper()
	l := &verifiedLoad{stop: make(chan struct{})}
	for i, addr := range addrs {
		for j := range perAddr {
			nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Fatalf("load: dial %s: %v", addr, err)
			}
			l.wg.Add(1)
			go l.client(nc, fmt.Sprintf("k%d.%d.", i, j))
		}
	}
	return l
}

// client sets and gets keys of its own, prefix and a number, on nc.
func (l *verifiedLoad) client(nc net.Conn, prefix string) {
	defer l.wg.Done()
	defer nc.Close()
	r := bufio.NewReader(nc)
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		key := fmt.Sprintf("%s%d", prefix, n%300)
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(nc, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(key), key, key)
		if err := l.check(r, key); err != nil {
			l.dropped.Add(1)
			l.note(fmt.Sprintf("%s: %v", key, err))
			return
		}
	}
}

// check reads the set's reply and the get's, and counts them.
func (l *verifiedLoad) check(r *bufio.Reader, key string) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	switch {
	case strings.HasPrefix(line, "SERVER_ERROR"):
		l.serverErrs.Add(1)
	case line != "STORED\r\n":
		l.wrongReply(key, line)
	}
	line, err = r.ReadString('\n')
	if err != nil {
		return err
	}
	switch {
	case line == "END\r\n":
		l.misses.Add(1)
	case strings.HasPrefix(line, "SERVER_ERROR"):
		l.serverErrs.Add(1)
	case line == fmt.Sprintf("VALUE %s 0 %d\r\n", key, len(key)):
		val, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		end, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if val != key+"\r\n" || end != "END\r\n" {
			l.wrongReply(key, line+val+end)
			return nil
		}
		l.ok.Add(1)
	default:
		l.wrongReply(key, line)
	}
	return nil
}

func (l *verifiedLoad) wrongReply(key, got string) {
	l.wrong.Add(1)
	l.note(fmt.Sprintf("%s: got %q", key, got))
}

func (l *verifiedLoad) note(s string) {
	l.mu.Lock()
	if l.firstWrong == "" {
		l.firstWrong = s
	}
	l.mu.Unlock()
}

// finish stops the clients and returns the counts.
func (l *verifiedLoad) finish() string {
	close(l.stop)
	l.wg.Wait()
	return fmt.Sprintf("ok %d, misses %d, server errors %d, wrong %d, dropped %d (first: %s)",
		l.ok.Load(), l.misses.Load(), l.serverErrs.Load(), l.wrong.Load(), l.dropped.Load(), l.firstWrong)
}
