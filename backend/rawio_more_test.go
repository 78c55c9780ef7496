package backend

import (
	"bytes"
	"io"
	"net"
	"syscall"
	"testing"
	"time"
)

// TestRawWritevMore: a head written with MSG_MORE and the bytes written
// after it reach the reader whole and in order. (A head alone would wait
// for the next write, or about 200 ms: the proxy writes the rest of the
// reply right after it, or leaves it to the writer goroutine's next write.)
func TestRawWritevMore(t *testing.T) {
	nc, peer := tcpPair(t)
	go func() {
		b, _ := io.ReadAll(peer)
		peer.Write(b) // echo, once the writer has half-closed
		peer.Close()
	}()
	head, body, tail := []byte("VALUE k 0 5\r\n"), []byte("hello"), []byte("\r\nEND\r\n")
	rc, _ := nc.(*net.TCPConn).SyscallConn()
	var iov []syscall.Iovec
	var werr error
	rc.Write(func(fd uintptr) bool {
		if _, werr = RawWritevMore(int(fd), [][]byte{head, body}, &iov); werr == nil {
			_, werr = RawWrite(int(fd), tail)
		}
		return true
	})
	if werr != nil {
		t.Fatal(werr)
	}
	nc.(*net.TCPConn).CloseWrite()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(nc)
	if want := bytes.Join([][]byte{head, body, tail}, nil); !bytes.Equal(got, want) || err != nil {
		t.Fatalf("got %q (%v), want %q", got, err, want)
	}
}
