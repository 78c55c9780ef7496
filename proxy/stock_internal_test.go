package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/config"
	"shardproxy/internal/testserver"
)

// TestQuietSessionGivesBackItsStock: after a pipelined burst the writer has
// kept written pendings on the session (see newPending); once the session
// is quiet, its FIN check gives them back to the pool, so a connection that
// once pipelined and then idles keeps none of them.
func TestQuietSessionGivesBackItsStock(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mc := testserver.StartMemcached(t)
	yaml := fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  timeout: 5000\n  servers:\n    - %s:1\n", mc.Addr)
	cfg, err := config.Parse([]byte(yaml), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	nc, err := net.Dial("tcp", srv.Addr("mc").String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	var req strings.Builder
	for i := range 64 {
		fmt.Fprintf(&req, "get quiet:%d\r\n", i)
	}
	if _, err := io.WriteString(nc, req.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(nc)
	for i := range 64 {
		if l, err := br.ReadString('\n'); err != nil || l != "END\r\n" {
			t.Fatalf("get %d: %q, %v", i, l, err)
		}
	}

	srv.mu.Lock()
	var sess *session
	for s := range srv.sessions {
		sess = s
	}
	srv.mu.Unlock()
	if sess == nil {
		t.Fatal("no session")
	}
	kept := func() int {
		sess.w.mu.Lock()
		defer sess.w.mu.Unlock()
		return len(sess.w.freed)
	}
	if n := kept(); n == 0 {
		t.Fatalf("after a burst of 64 pipelined gets the session kept no written pendings: the test shows nothing")
	} else {
		t.Logf("after the burst the session keeps %d written pendings", n)
	}
	deadline := time.Now().Add(3 * finCheck)
	for kept() > 0 || sess.w.stocked.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("a quiet session still keeps %d written pendings after %v", kept(), 3*finCheck)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
