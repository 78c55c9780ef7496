package fleet

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// TestDialNamesCause: a request that times out without a connection to
// etcd names why (here nothing listens), and is still the context's error.
func TestDialNamesCause(t *testing.T) {
	cli, err := Dial(Conn{Endpoints: []string{"127.0.0.1:" + strconv.Itoa(testserver.FreePort(t))}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _, err = Get(ctx, cli, prefix, time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("got %v, want the deadline naming the refused connection", err)
	}
}
