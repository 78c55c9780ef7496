package backend

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestRawWriteAll writes more buffers than one writev(2) takes, and more
// bytes than the socket holds, to a reader that starts late: writeAll
// must wait for room and carry on from the middle of a buffer, and the
// reader must get every byte in order.
func TestRawWriteAll(t *testing.T) {
	nc, peer := tcpPair(t)

	var bufs [][]byte
	var want bytes.Buffer
	for i := range 3000 {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i%97)
		if i%500 == 0 {
			b = bytes.Repeat([]byte{byte('A' + i%26)}, 1<<20) // past the socket's buffers
		}
		if i%7 == 0 {
			b = nil // empty buffers are skipped
		}
		bufs = append(bufs, b)
		want.Write(b)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(100 * time.Millisecond) // the writer fills the socket first
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	r := newRawConn(nc)
	if r == nil {
		t.Fatal("no raw socket for a TCP conn")
	}
	if err := r.writeAll(bufs, time.Now().Add(10*time.Second), nc.SetWriteDeadline); err != nil {
		t.Fatalf("writeAll: %v", err)
	}
	nc.(*net.TCPConn).CloseWrite()
	if b := <-got; !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("reader got %d bytes, want %d (first difference at %d)", len(b), want.Len(), firstDiff(b, want.Bytes()))
	}

	// A read returns what is there, and EOF once the peer closed.
	peer.Write([]byte("hello"))
	peer.Close()
	buf := make([]byte, 64)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := r.read(buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("read = %q, %v", buf[:n], err)
	}
	if n, err := r.read(buf); n != 0 || err != io.EOF {
		t.Fatalf("read after close = %d, %v; want 0, EOF", n, err)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// tcpPair returns the two ends of a loopback TCP connection, closed when
// the test ends.
func tcpPair(t *testing.T) (nc, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	nc, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	if peer = <-accepted; peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { peer.Close() })
	return nc, peer
}

// TestWriteAllDeadline: a write that waits for a peer that reads nothing
// fails at its deadline, and the deadline is cleared after: the next write,
// with none, is not failed by the passed one.
func TestWriteAllDeadline(t *testing.T) {
	nc, peer := tcpPair(t)
	r := newRawConn(nc)
	if r == nil {
		t.Fatal("no raw socket for a TCP conn")
	}
	big := make([]byte, 64<<20) // past both sockets' buffers
	start := time.Now()
	err := r.writeAll([][]byte{big}, start.Add(200*time.Millisecond), nc.SetWriteDeadline)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writeAll to a peer that does not read = %v, want a passed deadline", err)
	}
	if took := time.Since(start); took < 150*time.Millisecond || took > 5*time.Second {
		t.Fatalf("writeAll failed after %v, want about its 200ms deadline", took)
	}
	go io.Copy(io.Discard, peer)
	if err := r.writeAll([][]byte{[]byte("after")}, time.Time{}, nc.SetWriteDeadline); err != nil {
		t.Fatalf("writeAll after a passed deadline = %v, want the deadline cleared", err)
	}
}
