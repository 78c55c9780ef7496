package backend

import (
	"net"
	"testing"
	"time"

	"shardproxy/codec"
)

// silent is a dialect with no handshake, for servers that never answer.
type silent struct{ codec.Dialect }

func (silent) Handshake(codec.HandshakeOptions) []*codec.Request { return nil }

// TestNoCompletionWhileWriting: a socket killed while its writer is inside
// the system call that sends a batch (the server reads nothing; Close
// kills the socket) completes none of the batch's calls before that call
// has returned: until then it may still read their request bytes. (A
// reader that does not wait for the writer fails this often, not always:
// the writer's return from the system call races the reader's wake-up.)
func TestNoCompletionWhileWriting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		nc.(*net.TCPConn).SetReadBuffer(4 << 10)
		<-stop // holds the connection without reading a byte
	}()
	b := New(Config{Addr: ln.Addr().String(), Dialect: silent{}})
	var s *sock
	writing := make(chan bool, 1)
	call := &Call{Req: &codec.Request{Wire: make([]byte, 64<<20)}, Done: func(*Call) {
		s.mu.Lock()
		writing <- s.writing
		s.mu.Unlock()
	}}
	b.Send(call, 0)
	deadline := time.Now().Add(20 * time.Second)
	for {
		s = b.conns[0].cur.Load()
		if s != nil {
			s.mu.Lock()
			w := s.writing
			s.mu.Unlock()
			if w {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never started sending the batch")
		}
		time.Sleep(time.Millisecond)
	}
	b.Close()
	select {
	case w := <-writing:
		if w {
			t.Fatal("a call completed while its batch was still being written")
		}
	default:
		t.Fatal("Close returned before the call completed")
	}
	if cause := call.Reply.Err.(*Error).Cause; cause != CauseClosed {
		t.Fatalf("cause %v, want closed", cause)
	}
}
