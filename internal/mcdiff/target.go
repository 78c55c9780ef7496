package mcdiff

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Target answers one request: wire is one complete request (command line
// and any data block); the reply is every byte it answers, empty when the
// request is quiet (noreply, meta q) and hidden.
type Target interface {
	Do(wire []byte) ([]byte, error)
}

// TargetFunc makes a function a Target.
type TargetFunc func(wire []byte) ([]byte, error)

// Do calls f.
func (f TargetFunc) Do(wire []byte) ([]byte, error) { return f(wire) }

// maxLine bounds one reply line a ConnTarget reads.
const maxLine = 64 << 10

// maxData bounds one value a ConnTarget reads.
const maxData = 16 << 20

// ConnTarget speaks to a server over a connection. Each request is followed
// by "mn\r\n", and the reply is everything before the "MN\r\n" that answers
// it: that frames the replies of quiet requests, and of requests whose
// reply shape depends on the server's state, without knowing the shape
// beforehand. Value blocks (VALUE, VA) are read by their length, so a value
// holding "MN\r\n" does not end the reply.
type ConnTarget struct {
	Conn    net.Conn
	Timeout time.Duration // per request; zero means 10 seconds
	r       *bufio.Reader
}

var _ Target = (*ConnTarget)(nil)

// Dial connects a ConnTarget to addr.
func Dial(addr string) (*ConnTarget, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &ConnTarget{Conn: c}, nil
}

// Close closes the connection.
func (t *ConnTarget) Close() error { return t.Conn.Close() }

// Do sends wire and "mn\r\n" and returns the reply before "MN\r\n".
func (t *ConnTarget) Do(wire []byte) ([]byte, error) {
	if t.r == nil {
		t.r = bufio.NewReaderSize(t.Conn, 64<<10)
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if err := t.Conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	msg := make([]byte, 0, len(wire)+4)
	msg = append(append(msg, wire...), "mn\r\n"...)
	if _, err := t.Conn.Write(msg); err != nil {
		return nil, fmt.Errorf("mcdiff: write: %w", err)
	}
	out, err := ReadUntilMN(t.r)
	if err == nil && isNoop(wire) {
		// the request's own MN came first; this one answers ours
		_, err = ReadUntilMN(t.r)
		out = append(out, "MN\r\n"...)
	}
	return out, err
}

// isNoop reports whether wire is an mn request.
func isNoop(wire []byte) bool {
	line, _, _ := bytes.Cut(wire, []byte("\n"))
	f := bytes.Fields(line)
	return len(f) > 0 && string(f[0]) == "mn"
}

// ReadUntilMN reads replies from r up to and including a line "MN" and
// returns the bytes before it.
func ReadUntilMN(r *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		line, err := readLine(r)
		if err != nil {
			return out, err
		}
		if string(line) == "MN\r\n" {
			return out, nil
		}
		out = append(out, line...)
		n, ok := valueLen(line)
		if !ok {
			continue
		}
		if n < 0 || n > maxData {
			return out, fmt.Errorf("mcdiff: value length %d in %q", n, line)
		}
		data := make([]byte, n+2)
		if _, err := io.ReadFull(r, data); err != nil {
			return out, fmt.Errorf("mcdiff: read value: %w", err)
		}
		out = append(out, data...)
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if err == nil {
			return line, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) || len(line) > maxLine {
			return line, fmt.Errorf("mcdiff: read reply line: %w", err)
		}
	}
}

// valueLen reports the length of the value block that follows a VALUE or
// VA line.
func valueLen(line []byte) (int, bool) {
	f := bytes.Fields(line)
	switch {
	case len(f) >= 4 && string(f[0]) == "VALUE":
		n, err := strconv.Atoi(string(f[3]))
		return n, err == nil
	case len(f) >= 2 && string(f[0]) == "VA":
		n, err := strconv.Atoi(string(f[1]))
		return n, err == nil
	}
	return 0, false
}
