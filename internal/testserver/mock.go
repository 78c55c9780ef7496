package testserver

import (
	"bufio"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Mock is a memcached stand-in a test drives socket by socket, as
// memcached's proxy tests drive theirs: it answers "version" while
// Validate is set and every other request line with what answer returns
// for it, records the lines it reads, counts the sockets it accepts and
// can close the newest one.
type Mock struct {
	Addr     string
	Validate atomic.Bool  // answer "version"; set by NewMock
	Accepted atomic.Int64 // sockets accepted so far

	answer func(line string) string
	mu     sync.Mutex
	cur    net.Conn
	lines  []string
}

// NewMock starts a Mock on a free loopback port (see Fake) that answers
// each line but "version" with answer(line), which may block.
func NewMock(t testing.TB, answer func(line string) string) *Mock {
	t.Helper()
	m := &Mock{answer: answer}
	m.Validate.Store(true)
	m.Addr = Fake(t, m.serve)
	return m
}

func (m *Mock) serve(nc net.Conn) {
	m.Accepted.Add(1)
	m.mu.Lock()
	m.cur = nc
	m.mu.Unlock()
	r := bufio.NewReader(nc)
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			return
		}
		m.mu.Lock()
		m.lines = append(m.lines, l)
		m.mu.Unlock()
		if l == "version\r\n" {
			if m.Validate.Load() {
				nc.Write([]byte("VERSION 1.0.0-mock\r\n"))
			}
			continue
		}
		nc.Write([]byte(m.answer(l)))
	}
}

// CloseCur closes the newest socket from the server's side.
func (m *Mock) CloseCur() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cur.Close()
}

// Lines returns the lines read so far.
func (m *Mock) Lines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// Take returns the lines read since the last Take and forgets them.
func (m *Mock) Take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := m.lines
	m.lines = nil
	return l
}
