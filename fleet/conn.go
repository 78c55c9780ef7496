package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"shardproxy/config"
)

// Conn says how to reach the etcd cluster.
type Conn struct {
	// Endpoints are the etcd members' client addresses ("host:port").
	Endpoints []string
	// TLS, if set, is used for every connection to etcd.
	TLS *tls.Config
	// Username and Password authenticate, if set.
	Username, Password string
	// DialTimeout bounds each connection attempt; default 5s.
	DialTimeout time.Duration
	// DialOptions are added to the gRPC connection's (a scale simulation
	// passes its own stats handler or dialer).
	DialOptions []grpc.DialOption
}

// Dial returns an etcd client for c. It does not wait for a member to
// answer: the first request does.
func Dial(c Conn) (*clientv3.Client, error) {
	if len(c.Endpoints) == 0 {
		return nil, errors.New("fleet: no etcd endpoints")
	}
	dt := c.DialTimeout
	if dt <= 0 {
		dt = 5 * time.Second
	}
	opts := append(c.DialOptions[:len(c.DialOptions):len(c.DialOptions)], grpc.WithChainUnaryInterceptor(nameCause(c)))
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints, DialTimeout: dt, TLS: c.TLS,
		Username: c.Username, Password: c.Password,
		DialOptions: opts, Logger: zap.NewNop(),
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("fleet: etcd %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

// nameCause returns the innermost interceptor of c's requests: a request
// that waited out its context for a connection fails naming why gRPC could
// not make one (a refused connection, a TLS handshake etcd or this client
// refused: the wrong CA, no client certificate), where the etcd client
// would return only the context's error. The error still wraps that.
func nameCause(c Conn) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil || ctx.Err() == nil {
			return err
		}
		st, ok := status.FromError(err)
		if !ok {
			return err
		}
		cause, found := strings.CutPrefix(st.Message(), "latest balancer error: ")
		if !found {
			return err
		}
		if c.TLS != nil && (strings.Contains(cause, syscall.EPIPE.Error()) || strings.Contains(cause, syscall.ECONNRESET.Error())) {
			if alert := tlsAlert(c.TLS, c.Endpoints); alert != "" {
				cause += "; " + alert
			}
		}
		return &unreachableError{err: ctx.Err(), cause: cause}
	}
}

// tlsAlert returns the TLS alert a member sends a client configured by cfg
// just after the handshake, "" if none does. A member that requires a
// client certificate refuses a client without one so, once a TLS 1.3
// handshake has completed on the client's side; gRPC, writing at once,
// may report only the broken connection.
func tlsAlert(cfg *tls.Config, endpoints []string) string {
	const wait = 500 * time.Millisecond
	for _, ep := range endpoints {
		if i := strings.Index(ep, "://"); i >= 0 {
			ep = ep[i+3:]
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", ep)
		cancel()
		if err != nil {
			continue
		}
		conn.SetReadDeadline(time.Now().Add(wait))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err != nil && strings.Contains(err.Error(), "remote error: tls: ") {
			return fmt.Sprintf("etcd %s: %v", ep, err)
		}
	}
	return ""
}

// unreachableError is a context's error with why etcd was not reached.
type unreachableError struct {
	err   error
	cause string
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("%v: etcd not reached: %s", e.err, e.cause)
}

func (e *unreachableError) Unwrap() error { return e.err }

// ConnOf returns the Conn a fleet: section describes, its TLS files read.
func ConnOf(f *config.Fleet) (Conn, error) {
	c := Conn{Endpoints: f.Endpoints, Username: f.Username, Password: f.Password}
	if f.TLSCA == "" && f.TLSCert == "" {
		return c, nil
	}
	t, err := TLSConfig(f.TLSCA, f.TLSCert, f.TLSKey)
	c.TLS = t
	return c, err
}

// TLSConfig returns a client TLS configuration: ca ("" for the system's
// roots) signs the servers' certificates; cert and key ("" for none) are
// this client's.
func TLSConfig(ca, cert, key string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("fleet: tls_ca: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("fleet: tls_ca %s: no PEM certificate", ca)
		}
	}
	if cert != "" || key != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("fleet: tls_cert/tls_key: %w", err)
		}
		t.Certificates = []tls.Certificate{c}
	}
	return t, nil
}
