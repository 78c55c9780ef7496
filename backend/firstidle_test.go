package backend_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"shardproxy/backend"
)

// ordered is a memcached stand-in that numbers its sockets in the order it
// accepts them, answers version at once and "mg KEY" with "HD" only when
// the test lets it (release), and reports which socket each mg came on.
type ordered struct {
	got     chan int      // the socket number of each mg, as it arrives
	release chan struct{} // one HD per receive
}

func startOrdered(t *testing.T) (addr string, o *ordered) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o = &ordered{got: make(chan int, 16), release: make(chan struct{}, 16)}
	go func() {
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func(n int, nc net.Conn) {
				defer nc.Close()
				r := bufio.NewReader(nc)
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == "version\r\n" {
						nc.Write([]byte("VERSION 1.6.45\r\n"))
						continue
					}
					o.got <- n
					<-o.release
					nc.Write([]byte("HD\r\n"))
				}
			}(n, nc)
		}
	}()
	return ln.Addr().String(), o
}

func (o *ordered) next(t *testing.T) int {
	t.Helper()
	select {
	case n := <-o.got:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no request reached the server")
		return -1
	}
}

// TestFirstIdle checks Config.FirstIdle, memcached proxy's choice of a
// socket: preconnected slots connect in slot order; a call goes to the
// first slot with nothing in flight whatever its hint, so a lightly loaded
// backend uses its first socket; a call finding the first busy takes the
// next idle one.
func TestFirstIdle(t *testing.T) {
	addr, srv := startOrdered(t)
	b := backend.New(backend.Config{Addr: addr, Dialect: mc, Conns: 3, Preconnect: true, FirstIdle: true,
		ConnectTimeout: 2 * time.Second, Timeout: 5 * time.Second})
	defer b.Close()
	send := func(hint uint32) chan struct{} {
		done := make(chan struct{})
		b.Send(&backend.Call{Req: request(t, "mg k\r\n"), Done: func(*backend.Call) { close(done) }}, hint)
		return done
	}
	wait := func(done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("call not completed")
		}
	}
	for hint := range uint32(5) { // one at a time: always the first socket
		done := send(hint)
		if n := srv.next(t); n != 0 {
			t.Errorf("hint %d: went to socket %d, want 0", hint, n)
		}
		srv.release <- struct{}{}
		wait(done)
	}
	var held []chan struct{}
	for want := range 3 { // each held: the next goes to the next socket
		held = append(held, send(7))
		if n := srv.next(t); n != want {
			t.Errorf("with %d held: went to socket %d, want %d", want, n, want)
		}
	}
	for _, done := range held {
		srv.release <- struct{}{}
		wait(done)
	}
}
