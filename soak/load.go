package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	keysPerClient = 200
	batchKeys     = 8
	replyTimeout  = 10 * time.Second
)

// tally counts reply classes; one per client, merged at the end.
type tally struct {
	mu       sync.Mutex
	requests int64
	correct  int64
	errors   map[string]int64
	wrong    int64
	lost     int64
	wrongLog []string
}

func newTally() *tally { return &tally{errors: map[string]int64{}} }

func (t *tally) add(o *tally) {
	t.mu.Lock()
	defer t.mu.Unlock()
	o.mu.Lock()
	defer o.mu.Unlock()
	t.requests += o.requests
	t.correct += o.correct
	t.wrong += o.wrong
	t.lost += o.lost
	for k, v := range o.errors {
		t.errors[k] += v
	}
	t.wrongLog = append(t.wrongLog, o.wrongLog...)
}

func (t *tally) ok()               { t.mu.Lock(); t.correct++; t.mu.Unlock() }
func (t *tally) fail(cause string) { t.mu.Lock(); t.errors[cause]++; t.mu.Unlock() }
func (t *tally) lose(n int)        { t.mu.Lock(); t.lost += int64(n); t.mu.Unlock() }
func (t *tally) sent(n int)        { t.mu.Lock(); t.requests += int64(n); t.mu.Unlock() }
func (t *tally) bad(msg string) {
	t.mu.Lock()
	t.wrong++
	if len(t.wrongLog) < 20 {
		t.wrongLog = append(t.wrongLog, msg)
	}
	t.mu.Unlock()
}

// client is one load goroutine with its own connection and keys.
type client struct {
	redis   bool
	addr    string
	prefix  string
	keys    keyTable
	version uint64
	t       *tally
	conn    net.Conn
	r       *bufio.Reader
	n       int
}

// op is one request of a batch: a set of key at version, or a get of keys.
type op struct {
	set     bool
	keys    []string
	version uint64
}

func (c *client) run(stop <-chan struct{}) {
	defer func() {
		if c.conn != nil {
			c.conn.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return
		default:
		}
		if c.conn == nil {
			conn, err := net.DialTimeout("tcp", c.addr, 2*time.Second)
			if err != nil {
				c.t.fail("dial: " + err.Error())
				time.Sleep(100 * time.Millisecond)
				continue
			}
			c.conn, c.r = conn, bufio.NewReaderSize(conn, 64<<10)
		}
		c.batch()
	}
}

// batch pipelines batchKeys sets, one multi-get of the same keys and one
// single get, then reads and checks every reply in order.
func (c *client) batch() {
	c.n++
	base := (c.n * batchKeys) % keysPerClient
	keys := make([]string, batchKeys)
	var ops []op
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:k%d", c.prefix, (base+i)%keysPerClient)
		c.version++
		ops = append(ops, op{set: true, keys: keys[i : i+1], version: c.version})
	}
	ops = append(ops, op{keys: keys}, op{keys: keys[:1]})

	var buf []byte
	for _, o := range ops {
		buf = c.encode(buf, o)
	}
	c.t.sent(len(ops))
	c.conn.SetDeadline(time.Now().Add(replyTimeout))
	if _, err := c.conn.Write(buf); err != nil {
		c.broken(ops, 0, err)
		return
	}
	for i, o := range ops {
		var err error
		if o.set {
			err = c.readSet(o)
		} else {
			err = c.readGet(o)
		}
		if err != nil {
			c.broken(ops, i, err)
			return
		}
	}
}

// broken records ops[i:] as lost (no reply within replyTimeout or the
// connection closed) and their sets as unacknowledged, and drops the
// connection.
func (c *client) broken(ops []op, i int, err error) {
	for _, o := range ops[i:] {
		if o.set {
			c.keys.setUncertain(o.keys[0], o.version)
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.lose(len(ops) - i)
	} else if errors.Is(err, errProtocol) {
		c.t.bad(fmt.Sprintf("%s: %v", c.prefix, err))
		c.t.lose(len(ops) - i - 1)
	} else {
		c.t.lose(len(ops) - i)
	}
	c.t.fail("client connection: " + errorClass(err))
	c.conn.Close()
	c.conn = nil
}

func errorClass(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

var errProtocol = errors.New("unparsable reply")

func (c *client) encode(buf []byte, o op) []byte {
	if c.redis {
		if o.set {
			v := encodeValue(o.keys[0], o.version)
			return fmt.Appendf(buf, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(o.keys[0]), o.keys[0], len(v), v)
		}
		cmd := "MGET"
		if len(o.keys) == 1 {
			cmd = "GET"
		}
		buf = fmt.Appendf(buf, "*%d\r\n$%d\r\n%s\r\n", len(o.keys)+1, len(cmd), cmd)
		for _, k := range o.keys {
			buf = fmt.Appendf(buf, "$%d\r\n%s\r\n", len(k), k)
		}
		return buf
	}
	if o.set {
		v := encodeValue(o.keys[0], o.version)
		return fmt.Appendf(buf, "set %s 0 0 %d\r\n%s\r\n", o.keys[0], len(v), v)
	}
	return fmt.Appendf(buf, "get %s\r\n", strings.Join(o.keys, " "))
}

func (c *client) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(s, "\r\n") {
		return "", fmt.Errorf("%w: line without CRLF %q", errProtocol, abbrev(s))
	}
	return s[:len(s)-2], nil
}

func isErrorLine(redis bool, l string) bool {
	if redis {
		return strings.HasPrefix(l, "-")
	}
	return l == "ERROR" || strings.HasPrefix(l, "SERVER_ERROR") || strings.HasPrefix(l, "CLIENT_ERROR")
}

func (c *client) readSet(o op) error {
	l, err := c.line()
	if err != nil {
		return err
	}
	switch {
	case (c.redis && l == "+OK") || (!c.redis && l == "STORED"):
		c.keys.setAcked(o.keys[0], o.version)
		c.t.ok()
	case isErrorLine(c.redis, l):
		c.keys.setUncertain(o.keys[0], o.version)
		c.t.fail(errorCause(l))
	default:
		c.keys.setUncertain(o.keys[0], o.version)
		return fmt.Errorf("%w: set %s: %q", errProtocol, o.keys[0], abbrev(l))
	}
	return nil
}

// readData reads n bytes and the CRLF after them.
func (c *client) readData(n int) (string, error) {
	b := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, b); err != nil {
		return "", err
	}
	if string(b[n:]) != "\r\n" {
		return "", fmt.Errorf("%w: data block without CRLF", errProtocol)
	}
	return string(b[:n]), nil
}

func (c *client) readGet(o op) error {
	if c.redis {
		return c.readRedisGet(o)
	}
	var wrong []string
	next := 0
	for {
		l, err := c.line()
		if err != nil {
			return err
		}
		if l == "END" {
			break
		}
		if isErrorLine(false, l) {
			if len(wrong) > 0 {
				c.verdict(wrong)
			} else {
				c.t.fail(errorCause(l))
			}
			return nil
		}
		key, data, err := c.readValue(l)
		if err != nil {
			return err
		}
		pos := hitAt(o.keys, next, key)
		if pos < 0 {
			wrong = append(wrong, fmt.Sprintf("key %s not asked for, repeated or out of order", key))
			continue
		}
		next = pos + 1
		if err := c.keys.checkHit(key, data); err != nil {
			wrong = append(wrong, err.Error())
		}
	}
	c.verdict(wrong)
	return nil
}

// readValue reads the value whose VALUE line is l.
func (c *client) readValue(l string) (key, data string, err error) {
	f := strings.Fields(l)
	if len(f) != 4 || f[0] != "VALUE" {
		return "", "", fmt.Errorf("%w: get: %q", errProtocol, abbrev(l))
	}
	size, err := strconv.Atoi(f[3])
	if err != nil || size < 0 || size > 1<<20 {
		return "", "", fmt.Errorf("%w: get: %q", errProtocol, abbrev(l))
	}
	data, err = c.readData(size)
	return f[1], data, err
}

// hitAt returns the position of a hit's key among the keys asked for, from
// next on (hits come in request order; keys in between were misses), or -1.
func hitAt(keys []string, next int, key string) int {
	for j := next; j < len(keys); j++ {
		if keys[j] == key {
			return j
		}
	}
	return -1
}

func (c *client) verdict(wrong []string) {
	if len(wrong) > 0 {
		c.t.bad(c.prefix + ": " + strings.Join(wrong, "; "))
	} else {
		c.t.ok()
	}
}

// bulk reads one RESP bulk string reply; nil for $-1.
func (c *client) bulk(l string) (*string, error) {
	if !strings.HasPrefix(l, "$") {
		return nil, fmt.Errorf("%w: expected a bulk string: %q", errProtocol, abbrev(l))
	}
	n, err := strconv.Atoi(l[1:])
	if err != nil || n < -1 || n > 1<<20 {
		return nil, fmt.Errorf("%w: bulk length %q", errProtocol, abbrev(l))
	}
	if n == -1 {
		return nil, nil
	}
	s, err := c.readData(n)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

func (c *client) readRedisGet(o op) error {
	l, err := c.line()
	if err != nil {
		return err
	}
	if isErrorLine(true, l) {
		c.t.fail(errorCause(l))
		return nil
	}
	values, elemErr, err := c.readRedisValues(l, len(o.keys))
	if err != nil {
		return err
	}
	var wrong []string
	for i, v := range values {
		if v != nil {
			if err := c.keys.checkHit(o.keys[i], *v); err != nil {
				wrong = append(wrong, err.Error())
			}
		}
	}
	if elemErr != "" && len(wrong) == 0 {
		c.t.fail(elemErr)
		return nil
	}
	c.verdict(wrong)
	return nil
}

// readRedisValues reads the values of a GET's reply (nkeys 1) or an MGET's
// whose first line is l, nil for a miss. elemErr is the cause of an MGET
// element's error, which leaves that element nil.
func (c *client) readRedisValues(l string, nkeys int) (values []*string, elemErr string, err error) {
	if nkeys == 1 {
		v, err := c.bulk(l)
		if err != nil {
			return nil, "", err
		}
		return []*string{v}, "", nil
	}
	if !strings.HasPrefix(l, "*") {
		return nil, "", fmt.Errorf("%w: MGET: %q", errProtocol, abbrev(l))
	}
	n, err := strconv.Atoi(l[1:])
	if err != nil || n != nkeys {
		return nil, "", fmt.Errorf("%w: MGET array of %q for %d keys", errProtocol, l[1:], nkeys)
	}
	for range n {
		el, err := c.line()
		if err != nil {
			return nil, "", err
		}
		if isErrorLine(true, el) {
			// An element error (a proxy may answer a failed server's
			// keys so): counted as that request's error, once.
			values = append(values, nil)
			elemErr = errorCause(el)
			continue
		}
		v, err := c.bulk(el)
		if err != nil {
			return nil, "", err
		}
		values = append(values, v)
	}
	return values, elemErr, nil
}
