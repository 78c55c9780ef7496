package config

import (
	"fmt"
	"strings"
)

// securityKeys are the TLS and ACL keys, which every kind of pool reads.
var securityKeys = map[string]poolKey{
	"redis_auth_user":        stringKey(func(p *Pool) *string { return &p.RedisAuthUser }, checkRedisAuthUser, ""),
	"tls_cert":               pathKey(func(p *Pool) *string { return &p.TLSCert }),
	"tls_key":                pathKey(func(p *Pool) *string { return &p.TLSKey }),
	"tls_client_ca":          pathKey(func(p *Pool) *string { return &p.TLSClientCA }),
	"server_tls":             boolKey(func(p *Pool) *bool { return &p.ServerTLS }, false),
	"server_tls_ca":          pathKey(func(p *Pool) *string { return &p.ServerTLSCA }).onlyIf(serverTLS),
	"server_tls_cert":        pathKey(func(p *Pool) *string { return &p.ServerTLSCert }).onlyIf(serverTLS),
	"server_tls_key":         pathKey(func(p *Pool) *string { return &p.ServerTLSKey }).onlyIf(serverTLS),
	"server_tls_server_name": stringKey(func(p *Pool) *string { return &p.ServerTLSServerName }, checkServerTLSServerName, "").onlyIf(serverTLS),
	"server_tls_skip_verify": boolKey(func(p *Pool) *bool { return &p.ServerTLSSkipVerify }, false).onlyIf(serverTLS),
}

// pathKey is a key setting a string field to a file path, which must not be
// empty; Marshal leaves it out when it is.
func pathKey(field func(*Pool) *string) poolKey {
	return stringKey(field, nonEmpty("must be the path of a PEM file"), "")
}

// checkRedisAuthUser wants redis_auth_user, a Redis ACL user name: not
// empty, no spaces (Redis's ACL SETUSER refuses them).
func checkRedisAuthUser(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return fmt.Sprintf("%q is not a user name (not empty, no spaces)", s)
	}
	return ""
}

// checkServerTLSServerName wants server_tls_server_name, a host name.
func checkServerTLSServerName(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n/") {
		return fmt.Sprintf("%q is not a host name", s)
	}
	return ""
}

// serverTLSKeys are the keys that need server_tls: true.
var serverTLSKeys = []string{"server_tls_ca", "server_tls_cert", "server_tls_key", "server_tls_server_name", "server_tls_skip_verify"}

// validateSecurity checks the TLS and ACL keys against each other; a Lua
// pool also refuses server_tls (lua/config_kind.go).
func (pp *poolParser) validateSecurity() {
	p := pp.p
	pp.pair("tls_cert", "tls_key")
	if line, ok := pp.keys["tls_client_ca"]; ok && p.TLSCert == "" && !pp.bad["tls_cert"] && !pp.bad["tls_client_ca"] {
		pp.fail(line, "tls_client_ca", "needs tls_cert and tls_key: client certificates are checked on a TLS listener")
	}
	if p.ServerTLS {
		pp.validateServerTLS()
	} else {
		pp.refuseKeys(serverTLSKeys, "server_tls", "needs server_tls: true")
	}
	pp.validateRedisAuthUser()
}

// validateRedisAuthUser checks that redis_auth_user is on a redis pool,
// with the user's password.
func (pp *poolParser) validateRedisAuthUser() {
	p := pp.p
	line, ok := pp.keys["redis_auth_user"]
	switch {
	case !ok || pp.bad["redis_auth_user"]:
	case !p.Redis && !pp.bad["redis"]:
		pp.fail(line, "redis_auth_user", "is only valid for a redis pool (redis: true)")
	case p.RedisAuth == "" && !pp.bad["redis_auth"]:
		pp.fail(line, "redis_auth_user", "needs redis_auth, the user's password")
	}
}

// validateServerTLS checks the server_tls keys of a pool with server_tls:
// true: something must be verified, and every server must have a name to
// verify.
func (pp *poolParser) validateServerTLS() {
	p := pp.p
	pp.pair("server_tls_cert", "server_tls_key")
	if line, ok := pp.keys["server_tls_skip_verify"]; ok && p.ServerTLSSkipVerify {
		for _, key := range []string{"server_tls_ca", "server_tls_server_name"} {
			if _, set := pp.keys[key]; set && !pp.bad[key] {
				pp.fail(line, "server_tls_skip_verify", "cannot be true with "+key+": nothing would be verified")
			}
		}
	}
	if p.ServerTLSServerName != "" || p.ServerTLSSkipVerify || pp.bad["server_tls_server_name"] || pp.bad["server_tls_skip_verify"] {
		return
	}
	for _, s := range p.Servers {
		if s.Network == "unix" {
			pp.fail(s.Line, "servers", fmt.Sprintf("%q: a unix socket has no host name to verify; "+
				"set server_tls_server_name", s.Addr))
		}
	}
}

// pair checks that keys a and b are both set or both absent.
func (pp *poolParser) pair(a, b string) {
	la, hasA := pp.keys[a]
	lb, hasB := pp.keys[b]
	switch {
	case pp.bad[a] || pp.bad[b]:
	case hasA && !hasB:
		pp.fail(la, b, "is missing; "+a+" needs it")
	case hasB && !hasA:
		pp.fail(lb, a, "is missing; "+b+" needs it")
	}
}
