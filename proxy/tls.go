package proxy

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	"shardproxy/config"
)

// A pool's TLS settings are read from their files when the pool is built
// (at start and at every reload), so a missing or bad file fails that start
// or reload with an error naming the key and the file.

// tlsCache hands out one *tls.Config per distinct client-side TLS setup
// (settings and file contents), so a reload that changes nothing keeps the
// same pointer and with it the backends keyed by it (backendKey.tls), while
// a rotated certificate makes new backends.
var tlsCache = struct {
	sync.Mutex
	m map[string]*tls.Config
}{m: map[string]*tls.Config{}}

// listenTLS returns the TLS configuration pc's listener serves, or nil for
// a plain listener.
func listenTLS(cfg *config.Config, pc *config.Pool) (*tls.Config, error) {
	if pc.TLSCert == "" {
		return nil, nil
	}
	cert, err := loadKeyPair(cfg, "tls_cert", pc.TLSCert, "tls_key", pc.TLSKey)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if pc.TLSClientCA != "" {
		roots, _, err := loadCAs(cfg, "tls_client_ca", pc.TLSClientCA)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = roots
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// serverTLS returns the TLS configuration the pool dials its servers with,
// or nil when server_tls is off.
func serverTLS(cfg *config.Config, pc *config.Pool) (*tls.Config, error) {
	if !pc.ServerTLS {
		return nil, nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%q %t\n", pc.ServerTLSServerName, pc.ServerTLSSkipVerify)
	c := &tls.Config{
		ServerName:         pc.ServerTLSServerName,
		InsecureSkipVerify: pc.ServerTLSSkipVerify, //nolint:gosec // documented as for tests only
		MinVersion:         tls.VersionTLS12,
	}
	if pc.ServerTLSCA != "" {
		roots, pem, err := loadCAs(cfg, "server_tls_ca", pc.ServerTLSCA)
		if err != nil {
			return nil, err
		}
		c.RootCAs = roots
		h.Write(pem)
	}
	if pc.ServerTLSCert != "" {
		cert, err := loadKeyPair(cfg, "server_tls_cert", pc.ServerTLSCert, "server_tls_key", pc.ServerTLSKey)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{cert}
		for _, der := range cert.Certificate {
			h.Write(der)
		}
		fmt.Fprintf(h, "%T\n", cert.PrivateKey)
		h.Write([]byte(pc.ServerTLSKey))
	}
	key := hex.EncodeToString(h.Sum(nil))
	tlsCache.Lock()
	defer tlsCache.Unlock()
	if old, ok := tlsCache.m[key]; ok {
		return old, nil
	}
	tlsCache.m[key] = c
	return c, nil
}

// loadKeyPair reads a PEM certificate (chain) and its private key.
func loadKeyPair(cfg *config.Config, certKey, certPath, keyKey, keyPath string) (tls.Certificate, error) {
	certPath, keyPath = cfg.Path(certPath), cfg.Path(keyPath)
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", certKey, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s: %w", keyKey, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s %s, %s %s: %w", certKey, certPath, keyKey, keyPath, err)
	}
	return cert, nil
}

// loadCAs reads a PEM file of CA certificates; it returns the pool and the
// file's bytes.
func loadCAs(cfg *config.Config, key, path string) (*x509.CertPool, []byte, error) {
	path = cfg.Path(path)
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", key, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("%s %s: %w", key, path, errNoCertificates)
	}
	return roots, pem, nil
}

var errNoCertificates = errors.New("no PEM certificate found")
