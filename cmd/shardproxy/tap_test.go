package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/internal/testserver"
	"shardproxy/observe"
	"shardproxy/proxy"
)

// TestTapCommand: shardproxy tap follows a running proxy's admin and
// prints the requests its filter passes, and only those.
func TestTapCommand(t *testing.T) {
	mc := testserver.StartMemcached(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := config.Parse([]byte(fmt.Sprintf("mc:\n  listen: 127.0.0.1:0\n  servers:\n    - %s:1 s1\n", mc.Addr)), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := proxy.New(cfg, proxy.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	web := admin.NewHTTP(srv, admin.HTTPConfig{Logger: quiet})
	if err := web.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { web.Close() })

	ctx, cancel := context.WithCancel(context.Background())
	var out testserver.Buffer
	done := make(chan error, 1)
	go func() { done <- tap(ctx, web.Addr().String(), "", observe.Filter{Key: "user:*", Command: "get"}, &out) }()
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().Tap.Subscribers != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tap did not subscribe")
		}
	}
	nc, err := net.Dial("tcp", srv.Addr("mc").String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, "get other\r\nset user:1 0 0 1\r\nx\r\nget user:1\r\n")
	r := bufio.NewReader(nc)
	for _, want := range []string{"END", "STORED", "VALUE user:1 0 1", "x", "END"} {
		if l, err := r.ReadString('\n'); err != nil || strings.TrimSpace(l) != want {
			t.Fatalf("reply %q %v, want %q", l, err, want)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing printed")
		}
	}
	cancel()
	<-done
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], ` [mc 127.0.0.1:`) || !strings.Contains(lines[0], `] "get" "user:1" backend=s1 `) ||
		!strings.HasSuffix(lines[0], " result=hit") {
		t.Errorf("printed %q", lines)
	}

	var errb bytes.Buffer
	if code := tapCommand([]string{"--admin", web.Addr().String(), "--sample", "2"}, io.Discard, &errb); code != 2 {
		t.Errorf("--sample 2: code %d, %s", code, errb.String())
	}
}
