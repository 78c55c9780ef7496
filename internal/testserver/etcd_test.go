package testserver

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEtcdCluster starts three members, kills one (the others keep a
// quorum and stay healthy), brings it back and waits for it to rejoin.
func TestEtcdCluster(t *testing.T) {
	c := StartEtcd(t, 3)
	if got := len(c.Endpoints()); got != 3 {
		t.Fatalf("endpoints = %d, want 3", got)
	}
	c.Members[0].Stop()
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("two of three members: %v", err)
	}
	c.Members[0].Restart()
	if err := c.WaitHealthy(10 * time.Second); err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if err := c.healthy(c.Members[0].Addr); err != nil {
		t.Fatalf("restarted member: %v", err)
	}
}

// TestEtcdClusterTLS starts a member that serves clients over TLS with a
// client certificate required: /health answers with the PKI's CA and
// client certificate, and not in plain text, without the client
// certificate, or to a client trusting another CA.
func TestEtcdClusterTLS(t *testing.T) {
	c := StartEtcdTLS(t, 1)
	if c.PKI == nil {
		t.Fatal("no PKI")
	}
	addr := c.Members[0].Addr
	if err := c.healthy(addr); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	other := NewPKI(t)
	for _, tc := range []struct {
		name   string
		scheme string
		tls    *tls.Config
		want   string
	}{
		{"plain text", "http", nil, ""},
		{"no client certificate", "https", c.PKI.ClientTLS(false), "certificate"},
		{"another CA", "https", other.ClientTLS(true), "certificate signed by unknown authority"},
	} {
		hc := http.Client{Timeout: probeTimeout, Transport: &http.Transport{TLSClientConfig: tc.tls}}
		resp, err := hc.Get(tc.scheme + "://" + addr + "/health")
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: %s", tc.name, resp.Status)
		} else if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
		hc.CloseIdleConnections()
	}
}
