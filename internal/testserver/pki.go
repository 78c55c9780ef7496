package testserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority with a server and a client
// certificate it signed, written as PEM files (ECDSA P-256) to a directory
// of the test's. Each NewPKI has a CA of its own, so a second one stands
// for a wrong CA.
type PKI struct {
	// Dir holds the files.
	Dir string
	// CA is the CA certificate's file.
	CA string
	// ServerCert and ServerKey are a server certificate (for 127.0.0.1 and
	// localhost) and its key.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate and its key.
	ClientCert, ClientKey string
	// Pool holds the CA certificate; Client is the client certificate.
	Pool   *x509.CertPool
	Client tls.Certificate
}

// NewPKI makes a CA and its server and client certificates, valid from an
// hour ago for a day, in a new temporary directory.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "shardproxy test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: dir, Pool: x509.NewCertPool()}
	p.Pool.AddCert(ca)
	p.CA = writePEM(t, dir, "ca.pem", "CERTIFICATE", caDER)
	// The server certificate is a client's too: an etcd member with
	// --client-cert-auth dials itself with it (its JSON gateway).
	p.ServerCert, p.ServerKey, _ = p.leaf(t, ca, caKey, "server", 2, x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	p.ClientCert, p.ClientKey, p.Client = p.leaf(t, ca, caKey, "client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// leaf makes a certificate for name signed by ca and writes it and its key
// as name.pem and name.key.
func (p *PKI) leaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string, serial int64,
	usage ...x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writePEM(t, p.Dir, name+".pem", "CERTIFICATE", der)
	keyFile = writePEM(t, p.Dir, name+".key", "EC PRIVATE KEY", keyDER)
	if pair, err = tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// ClientTLS is what a client trusting p's CA dials 127.0.0.1 with; with
// withCert, it presents p's client certificate.
func (p *PKI) ClientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.Pool, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{p.Client}
	}
	return c
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
