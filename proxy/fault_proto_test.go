package proxy_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// faultProto is how the fault tests speak one protocol.
type faultProto struct {
	poolOpts string                               // pool keys that select the protocol
	get      func(key string) string              // a request for key
	hit      func(key string) string              // its reply when key holds value(key)
	miss     string                               // its reply when key holds nothing
	set      func(key, v string) (string, string) // a request storing v, and its reply
	failure  func(cause string) string            // the reply to a request that failed for cause
	read     func(*bufio.Reader) (string, error)  // reads one reply
	// valueOffset is where the value's bytes start in hit(key).
	valueOffset func(key string) int64
	// impossible is a reply header announcing an impossible length.
	impossible string
	// extra is a complete reply no request asked for.
	extra string
	// multiGet and multiHit are a request for several keys (split over
	// servers by the proxy) and its reply when each holds its value.
	multiGet, multiHit func(keys ...string) string
	// served is what the server sends for gets of keys that were written
	// in one batch, each key holding its value.
	served func(keys ...string) string
}

var memcacheProto = &faultProto{
	// The faults land at offsets of the text replies (valueOffset, the
	// lengths of served): the servers must be sent text gets, not mg,
	// which the default (auto) sends to memcached.
	poolOpts: "  server_protocol: text\n",
	get:      func(k string) string { return "get " + k + "\r\n" },
	hit:      hit,
	miss:     "END\r\n",
	set: func(k, v string) (string, string) {
		return fmt.Sprintf("set %s 0 0 %d\r\n%s\r\n", k, len(v), v), "STORED\r\n"
	},
	failure: backendFailure,
	read:    func(r *bufio.Reader) (string, error) { return (&client{r: r}).tryReplyBuf() },
	valueOffset: func(k string) int64 {
		return int64(len(fmt.Sprintf("VALUE %s 0 %d\r\n", k, len(value(k)))))
	},
	impossible: "VALUE x 0 4294967293\r\n",
	extra:      "END\r\n",
	multiGet:   func(keys ...string) string { return "get " + strings.Join(keys, " ") + "\r\n" },
	multiHit:   multiHit,
	// A socket joins one-key gets written together into one multi-get.
	served: multiHit,
}

// respProto speaks RESP2 to a pool with "redis: true".
var respProto = &faultProto{
	poolOpts: "  redis: true\n",
	get:      func(k string) string { return respCommand("GET", k) },
	hit:      func(k string) string { return respBulk(value(k)) },
	miss:     "$-1\r\n",
	set: func(k, v string) (string, string) {
		return respCommand("SET", k, v), "+OK\r\n"
	},
	failure: func(cause string) string { return "-ERR backend failure: " + cause + "\r\n" },
	read:    readRESP,
	valueOffset: func(k string) int64 {
		return int64(len(fmt.Sprintf("$%d\r\n", len(value(k)))))
	},
	impossible: "$9999999999\r\n",
	extra:      "+OK\r\n",
	multiGet:   func(keys ...string) string { return respCommand(append([]string{"MGET"}, keys...)...) },
	multiHit: func(keys ...string) string {
		s := fmt.Sprintf("*%d\r\n", len(keys))
		for _, k := range keys {
			s += respBulk(value(k))
		}
		return s
	},
	served: func(keys ...string) string {
		var s string
		for _, k := range keys {
			s += respBulk(value(k))
		}
		return s
	},
}

// respCommand is args as a RESP multibulk request.
func respCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		b.WriteString(respBulk(a))
	}
	return b.String()
}

// respBulk is s as a RESP bulk string.
func respBulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

// readRESP reads one RESP2 or RESP3 reply, whole, nested aggregates
// included.
func readRESP(r *bufio.Reader) (string, error) {
	var b strings.Builder
	for pending := 1; pending > 0; pending-- {
		line, err := r.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			return b.String(), err
		}
		if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
			return b.String(), errors.New("malformed RESP line")
		}
		n, _ := strconv.Atoi(line[1 : len(line)-2])
		switch line[0] {
		case '$', '!', '=': // RESP3's blob error and verbatim string are framed as bulk strings
			if n >= 0 {
				data := make([]byte, n+2)
				if _, err := io.ReadFull(r, data); err != nil {
					return b.String(), err
				}
				b.Write(data)
			}
		case '*', '~', '>':
			pending += max(n, 0)
		case '%': // a RESP3 map: pairs
			pending += 2 * max(n, 0)
		case '|': // a RESP3 attribute: pairs, then the reply it annotates
			pending += 2*max(n, 0) + 1
		}
	}
	return b.String(), nil
}

// faultClient is a client of the rig's pool in the rig's protocol.
type faultClient struct {
	t     *testing.T
	proto *faultProto
	nc    net.Conn
	r     *bufio.Reader
}

// dial connects to the rig's pool.
func (r *faultRig) dial() *faultClient {
	r.t.Helper()
	nc, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		r.t.Fatalf("dial %s: %v", r.addr, err)
	}
	r.t.Cleanup(func() { nc.Close() })
	return &faultClient{t: r.t, proto: r.proto, nc: nc, r: newBufReader(nc)}
}

func (c *faultClient) send(s string) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *faultClient) reply() string {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	s, err := c.proto.read(c.r)
	if err != nil {
		c.t.Fatalf("read reply: %v (got %q)", err, s)
	}
	return s
}

func (c *faultClient) do(req string) string {
	c.t.Helper()
	c.send(req)
	return c.reply()
}
