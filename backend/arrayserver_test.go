package backend_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/codec"
	"shardproxy/internal/testserver"
	"shardproxy/resp"
)

var redis codec.Dialect = &resp.Dialect{}

// arrayServer is a loopback stand-in for Redis: it answers PING with
// +PONG, "LRANGE <n> ..." with an array of n 8-byte bulk strings written
// in 16 KiB writes (a big reply arriving in pieces), "GET <key>" with the
// key as a bulk string: 300ms late for a key starting "slow", not at all
// for one starting "hang" (closing the connection for one starting "die"). It reads
// requests while it writes replies.
type arrayServer struct {
	addr string
	// seen, if set, hears the name and first argument of every request
	// but PING, once the request is read.
	seen chan [2]string

	mu      sync.Mutex
	replies map[int][]byte
}

func startArrayServer(tb testing.TB, seen chan [2]string) *arrayServer {
	tb.Helper()
	s := &arrayServer{seen: seen, replies: map[int][]byte{}}
	s.addr = testserver.Fake(tb, s.serve)
	return s
}

// array returns the reply to "LRANGE <n>".
func (s *arrayServer) array(n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.replies[n]; ok {
		return r
	}
	r := fmt.Appendf(nil, "*%d\r\n", n)
	for i := range n {
		r = fmt.Appendf(r, "$8\r\n%08d\r\n", i)
	}
	s.replies[n] = r
	return r
}

func (s *arrayServer) serve(nc net.Conn) {
	defer nc.Close()
	// Requests are read while replies are written: a client that is
	// slow to read a big reply can still send.
	out := make(chan []byte, 4096)
	defer close(out)
	go func() {
		for p := range out {
			if p == nil { // a slow reply: the ones behind wait too
				time.Sleep(300 * time.Millisecond)
				continue
			}
			for len(p) > 0 {
				k := min(16<<10, len(p))
				if _, err := nc.Write(p[:k]); err != nil {
					nc.Close()
					for range out {
					}
					return
				}
				p = p[k:]
			}
		}
	}()
	r := bufio.NewReader(nc)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		name := string(bytes.ToUpper(args[0]))
		if name == "PING" {
			out <- []byte("+PONG\r\n")
			continue
		}
		arg := ""
		if len(args) > 1 {
			arg = string(args[1])
		}
		if s.seen != nil {
			s.seen <- [2]string{name, arg}
		}
		switch name {
		case "LRANGE":
			n, _ := strconv.Atoi(arg)
			out <- s.array(n)
		case "GET":
			if strings.HasPrefix(arg, "die") {
				return
			}
			if strings.HasPrefix(arg, "slow") {
				out <- nil
			}
			if !strings.HasPrefix(arg, "hang") {
				out <- fmt.Appendf(nil, "$%d\r\n%s\r\n", len(arg), arg)
			}
		default:
			out <- []byte("+OK\r\n")
		}
	}
}

// readCommand reads one multibulk request.
func readCommand(r *bufio.Reader) ([][]byte, error) {
	n, err := readLen(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([][]byte, n)
	for i := range args {
		size, err := readLen(r, '$')
		if err != nil {
			return nil, err
		}
		args[i] = make([]byte, size+2)
		if _, err := io.ReadFull(r, args[i]); err != nil {
			return nil, err
		}
		args[i] = args[i][:size]
	}
	return args, nil
}

func readLen(r *bufio.Reader, prefix byte) (int, error) {
	l, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(l) < 3 || l[0] != prefix {
		return 0, fmt.Errorf("bad line %q", l)
	}
	return strconv.Atoi(l[1 : len(l)-2])
}

// command builds and parses a RESP request.
func command(tb testing.TB, args ...string) *codec.Request {
	tb.Helper()
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	req := &codec.Request{}
	if _, err := redis.NewRequestParser(codec.Options{}).ParseRequest(b, req); err != nil {
		tb.Fatalf("parse %q: %v", args, err)
	}
	return req
}
