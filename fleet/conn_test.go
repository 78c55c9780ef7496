package fleet

import (
	"context"
	"errors"
	"regexp"
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

// TestTLSAlert: etcd that requires a client certificate refuses one
// without it by an alert after the handshake, which tlsAlert reads (gRPC
// may see only its own write fail); a client with the certificate hears
// no alert.
func TestTLSAlert(t *testing.T) {
	c := testserver.StartEtcdTLS(t, 1)
	noCert, err := TLSConfig(c.PKI.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	eps := []string{"https://" + c.Members[0].Addr}
	if got := tlsAlert(noCert, eps); !regexp.MustCompile(`tls: (bad certificate|certificate required)`).MatchString(got) {
		t.Fatalf("without a client certificate: %q", got)
	}
	good, err := TLSConfig(c.PKI.CA, c.PKI.ClientCert, c.PKI.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if got := tlsAlert(good, eps); got != "" {
		t.Fatalf("with the client certificate: %q", got)
	}
}
