package proxy

import (
	"net"
	"testing"
	"time"
)

// TestInputWaiting peeks at a socket's input without taking it.
func TestInputWaiting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if inputWaiting(s) {
		t.Fatal("input waiting before the client sent any")
	}
	c.Write([]byte("x"))
	for deadline := time.Now().Add(10 * time.Second); !inputWaiting(s); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no input waiting after the client sent a byte")
		}
	}
	b := make([]byte, 2)
	s.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := s.Read(b); n != 1 || b[0] != 'x' {
		t.Fatalf("read after the peek: %q %v", b[:n], err)
	}
}
