package proxy_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnixListen: a pool listening on a unix socket path (twemproxy's
// "listen: /path 0666") gets the socket's permissions, serves requests
// over it, pipelined, and notices a client that sends its last request
// and shuts down its write side.
func TestUnixListen(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	path := filepath.Join(t.TempDir(), "mc.sock")
	_, yaml := memcachedPool(t, 2, "")
	yaml = strings.Replace(yaml, "listen: 127.0.0.1:0", "listen: "+path+" 0600", 1)
	startProxy(t, yaml, "mc")

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket file mode %v, want a socket with 0600", fi.Mode())
	}

	nc, err := net.DialTimeout("unix", path, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	c := &client{t: t, nc: nc, r: bufio.NewReader(nc)}
	defer nc.Close()
	var req, want strings.Builder
	for i := range 50 {
		fmt.Fprintf(&req, "set u%d 0 0 2\r\nv%d\r\n", i, i%10)
		want.WriteString("STORED\r\n")
	}
	for i := range 50 {
		fmt.Fprintf(&req, "get u%d\r\n", i)
		fmt.Fprintf(&want, "VALUE u%d 0 2\r\nv%d\r\nEND\r\n", i, i%10)
	}
	c.send(req.String())
	var got strings.Builder
	for range 100 {
		got.WriteString(c.reply())
	}
	if got.String() != want.String() {
		t.Fatalf("pipelined over the unix socket:\n got %q\nwant %q", got.String(), want.String())
	}

	c.send("get u7\r\n")
	nc.(*net.UnixConn).CloseWrite()
	if got := c.reply(); got != "VALUE u7 0 2\r\nv7\r\nEND\r\n" {
		t.Fatalf("last request: %q", got)
	}
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := c.r.ReadByte(); err == nil {
		t.Fatalf("after the FIN: read %q, want the close", b)
	} else if !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("after the FIN: %v, want the close within 5 s", err)
	}
}
