package testserver

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Fake listens on a free loopback port and runs serve on its own goroutine
// for every connection it accepts, closing the connection when serve
// returns. It returns the listening address. When the test ends it stops
// accepting and waits for those goroutines, so serve must return once its
// connection is closed by the other end. Tests use it for backends a real
// server cannot play: hanging, slow, failing, scripted. Unlike the Start
// functions it runs under -short too.
func Fake(t testing.TB, serve func(nc net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer nc.Close()
				serve(nc)
			}()
		}
	}()
	return ln.Addr().String()
}

// FakeVersion is the version a FakeMemcached answers memcached's
// "version" with.
const FakeVersion = "VERSION 1.6.21\r\n"

// FakeMemcached is a Fake that reads memcached text lines: answer gets the
// number of its connection (1 for the first accepted) and each line, and
// returns what to write back ("" for nothing).
func FakeMemcached(t testing.TB, answer func(conn int, line string) string) string {
	t.Helper()
	var n atomic.Int32
	return Fake(t, func(nc net.Conn) {
		conn := int(n.Add(1))
		r := bufio.NewReader(nc)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if reply := answer(conn, line); reply != "" {
				nc.Write([]byte(reply))
			}
		}
	})
}
