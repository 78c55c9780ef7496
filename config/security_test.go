package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSecurityKeys(t *testing.T) {
	c, err := Load("testdata/security.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools[0]
	want := Pool{
		RedisAuth: "secret", RedisAuthUser: "alice",
		TLSCert: "certs/proxy.pem", TLSKey: "certs/proxy.key", TLSClientCA: "certs/clients.pem",
		ServerTLS: true, ServerTLSCA: "/etc/ssl/redis-ca.pem", ServerTLSCert: "certs/client.pem",
		ServerTLSKey: "certs/client.key", ServerTLSServerName: "redis.internal",
	}
	got := Pool{
		RedisAuth: p.RedisAuth, RedisAuthUser: p.RedisAuthUser,
		TLSCert: p.TLSCert, TLSKey: p.TLSKey, TLSClientCA: p.TLSClientCA,
		ServerTLS: p.ServerTLS, ServerTLSCA: p.ServerTLSCA, ServerTLSCert: p.ServerTLSCert,
		ServerTLSKey: p.ServerTLSKey, ServerTLSServerName: p.ServerTLSServerName,
		ServerTLSSkipVerify: p.ServerTLSSkipVerify,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("pool secure\n got %+v\nwant %+v", got, want)
	}
	if q := c.Pools[1]; !q.ServerTLS || !q.ServerTLSSkipVerify || q.TLSCert != "" {
		t.Errorf("pool testonly: %+v", q)
	}
	if got := c.Path(p.TLSCert); got != "testdata/certs/proxy.pem" {
		t.Errorf("Path(tls_cert) = %q, want relative to the config file", got)
	}
	if got := c.Path(p.ServerTLSCA); got != "/etc/ssl/redis-ca.pem" {
		t.Errorf("Path(server_tls_ca) = %q", got)
	}
}

// Every security key changes the pool's checksum, so a reload rebuilds a
// pool whose TLS or ACL settings changed.
func TestSecurityChecksum(t *testing.T) {
	base := mustParse(t, pool("  redis: true\n  redis_auth: pw\n  server_tls: true\n")).Pools[0].Checksum()
	for _, extra := range []string{
		"  redis_auth_user: bob\n",
		"  tls_cert: a.pem\n  tls_key: a.key\n",
		"  tls_cert: a.pem\n  tls_key: a.key\n  tls_client_ca: ca.pem\n",
		"  server_tls_ca: ca.pem\n",
		"  server_tls_cert: c.pem\n  server_tls_key: c.key\n",
		"  server_tls_server_name: example.com\n",
		"  server_tls_skip_verify: true\n",
	} {
		c := mustParse(t, pool("  redis: true\n  redis_auth: pw\n  server_tls: true\n"+extra))
		if c.Pools[0].Checksum() == base {
			t.Errorf("%q does not change the checksum", extra)
		}
	}
	plain := mustParse(t, pool("  redis: true\n  redis_auth: pw\n")).Pools[0].Checksum()
	if plain == base {
		t.Error("server_tls does not change the checksum")
	}
}

func TestSecurityMarshalOmitsDefaults(t *testing.T) {
	c := mustParse(t, pool(""))
	text, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"tls", "redis_auth_user"} {
		if strings.Contains(string(text), key) {
			t.Errorf("marshal of a plain pool has %s:\n%s", key, text)
		}
	}
}

func TestSecurityErrors(t *testing.T) {
	const at = `config: testdata/x.yml:`
	tests := []struct {
		name, text, want string
	}{
		{"tls_cert without tls_key", pool("  tls_cert: a.pem\n"),
			at + `3: pool "alpha": tls_key: is missing; tls_cert needs it`},
		{"tls_key without tls_cert", pool("  tls_key: a.key\n"),
			at + `3: pool "alpha": tls_cert: is missing; tls_key needs it`},
		{"tls_cert empty", pool("  tls_cert: \"\"\n  tls_key: a.key\n"),
			at + `3: pool "alpha": tls_cert: must be the path of a PEM file`},
		{"tls_key a list", pool("  tls_cert: a.pem\n  tls_key:\n   - a.key\n"),
			at + `5: pool "alpha": tls_key: must be a single value, not a list`},
		{"tls_client_ca without tls_cert", pool("  tls_client_ca: ca.pem\n"),
			at + `3: pool "alpha": tls_client_ca: needs tls_cert and tls_key: client certificates are checked on a TLS listener`},
		{"tls_client_ca empty", pool("  tls_cert: a.pem\n  tls_key: a.key\n  tls_client_ca: \"\"\n"),
			at + `5: pool "alpha": tls_client_ca: must be the path of a PEM file`},
		{"server_tls yes", pool("  server_tls: yes\n"),
			at + `3: pool "alpha": server_tls: "yes" is not true or false`},
		{"server_tls_ca without server_tls", pool("  server_tls_ca: ca.pem\n"),
			at + `3: pool "alpha": server_tls_ca: needs server_tls: true`},
		{"server_tls_cert with server_tls false", pool("  server_tls: false\n  server_tls_cert: c.pem\n  server_tls_key: c.key\n"),
			at + `4: pool "alpha": server_tls_cert: needs server_tls: true`},
		{"server_tls_key without server_tls", pool("  server_tls_key: c.key\n"),
			at + `3: pool "alpha": server_tls_key: needs server_tls: true`},
		{"server_tls_server_name without server_tls", pool("  server_tls_server_name: x\n"),
			at + `3: pool "alpha": server_tls_server_name: needs server_tls: true`},
		{"server_tls_skip_verify without server_tls", pool("  server_tls_skip_verify: true\n"),
			at + `3: pool "alpha": server_tls_skip_verify: needs server_tls: true`},
		{"server_tls_cert without key", pool("  server_tls: true\n  server_tls_cert: c.pem\n"),
			at + `4: pool "alpha": server_tls_key: is missing; server_tls_cert needs it`},
		{"server_tls_key without cert", pool("  server_tls: true\n  server_tls_key: c.key\n"),
			at + `4: pool "alpha": server_tls_cert: is missing; server_tls_key needs it`},
		{"server_tls_ca empty", pool("  server_tls: true\n  server_tls_ca: \"\"\n"),
			at + `4: pool "alpha": server_tls_ca: must be the path of a PEM file`},
		{"server_tls_server_name with a space", pool("  server_tls: true\n  server_tls_server_name: a b\n"),
			at + `4: pool "alpha": server_tls_server_name: "a b" is not a host name`},
		{"server_tls_server_name empty", pool("  server_tls: true\n  server_tls_server_name: \"\"\n"),
			at + `4: pool "alpha": server_tls_server_name: "" is not a host name`},
		{"server_tls_skip_verify maybe", pool("  server_tls: true\n  server_tls_skip_verify: maybe\n"),
			at + `4: pool "alpha": server_tls_skip_verify: "maybe" is not true or false`},
		{"skip_verify with a CA", pool("  server_tls: true\n  server_tls_ca: ca.pem\n  server_tls_skip_verify: true\n"),
			at + `5: pool "alpha": server_tls_skip_verify: cannot be true with server_tls_ca: nothing would be verified`},
		{"skip_verify with a server name", pool("  server_tls: true\n  server_tls_server_name: x\n  server_tls_skip_verify: true\n"),
			at + `5: pool "alpha": server_tls_skip_verify: cannot be true with server_tls_server_name: nothing would be verified`},
		{"unix server without a name to verify", "alpha:\n  listen: 127.0.0.1:1\n  server_tls: true\n  servers:\n   - /tmp/mc.sock:1\n",
			at + `5: pool "alpha": servers: "/tmp/mc.sock": a unix socket has no host name to verify; set server_tls_server_name`},
		{"server_tls on a Lua pool", "alpha:\n  listen: 127.0.0.1:1\n  lua: r.lua\n  server_tls: true\n",
			at + `4: pool "alpha": server_tls: a Lua pool's backends come from its route file, which cannot use TLS yet`},
		{"redis_auth_user on memcached", pool("  redis_auth_user: alice\n"),
			at + `3: pool "alpha": redis_auth_user: is only valid for a redis pool (redis: true)`},
		{"redis_auth_user without redis_auth", pool("  redis: true\n  redis_auth_user: alice\n"),
			at + `4: pool "alpha": redis_auth_user: needs redis_auth, the user's password`},
		{"redis_auth_user empty", pool("  redis: true\n  redis_auth: pw\n  redis_auth_user: \"\"\n"),
			at + `5: pool "alpha": redis_auth_user: "" is not a user name (not empty, no spaces)`},
		{"redis_auth_user with a space", pool("  redis: true\n  redis_auth: pw\n  redis_auth_user: a b\n"),
			at + `5: pool "alpha": redis_auth_user: "a b" is not a user name (not empty, no spaces)`},
		{"redis_auth_user twice", pool("  redis: true\n  redis_auth: pw\n  redis_auth_user: a\n  redis_auth_user: b\n"),
			at + `6: pool "alpha": redis_auth_user: duplicate key (first at line 5)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if got := e.Error(); got != tt.want {
				t.Errorf("first error\n got %s\nwant %s\n(all: %v)", got, tt.want, err)
			}
		})
	}
}

// Valid combinations parse.
func TestSecurityValid(t *testing.T) {
	for _, extra := range []string{
		"  tls_cert: a.pem\n  tls_key: a.key\n",
		"  server_tls: true\n",
		"  server_tls: false\n",
		"  server_tls: true\n  server_tls_skip_verify: false\n  server_tls_ca: ca.pem\n",
		"  redis: true\n  redis_auth: pw\n  redis_auth_user: alice\n",
	} {
		mustParse(t, pool(extra))
	}
}
