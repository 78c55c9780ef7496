package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// pathSetter sets a string field from a file path, which must not be empty.
func pathSetter(field func(*Pool) *string) setter {
	return func(pp *poolParser, key string, v *yaml.Node) {
		if s, ok := pp.scalar(key, v); ok {
			if s == "" {
				pp.fail(v.Line, key, "must be the path of a PEM file")
				return
			}
			*field(pp.p) = s
		}
	}
}

// setRedisAuthUser reads redis_auth_user, a Redis ACL user name: not empty,
// no spaces (Redis's ACL SETUSER refuses them).
func (pp *poolParser) setRedisAuthUser(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a user name (not empty, no spaces)", s))
		return
	}
	pp.p.RedisAuthUser = s
}

// setServerTLSServerName reads server_tls_server_name, a host name.
func (pp *poolParser) setServerTLSServerName(key string, v *yaml.Node) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return
	}
	if s == "" || strings.ContainsAny(s, " \t\r\n/") {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a host name", s))
		return
	}
	pp.p.ServerTLSServerName = s
}

// serverTLSKeys are the keys that need server_tls: true.
var serverTLSKeys = []string{"server_tls_ca", "server_tls_cert", "server_tls_key", "server_tls_server_name", "server_tls_skip_verify"}

// finishSecurity checks the TLS and ACL keys against each other.
func (pp *poolParser) finishSecurity() {
	p := pp.p
	pp.pair("tls_cert", "tls_key")
	if line, ok := pp.keys["tls_client_ca"]; ok && p.TLSCert == "" && !pp.bad["tls_cert"] && !pp.bad["tls_client_ca"] {
		pp.fail(line, "tls_client_ca", "needs tls_cert and tls_key: client certificates are checked on a TLS listener")
	}
	if !p.ServerTLS {
		if !pp.bad["server_tls"] {
			for _, key := range serverTLSKeys {
				if line, ok := pp.keys[key]; ok && !pp.bad[key] {
					pp.fail(line, key, "needs server_tls: true")
				}
			}
		}
	} else {
		pp.pair("server_tls_cert", "server_tls_key")
		if line, ok := pp.keys["server_tls_skip_verify"]; ok && p.ServerTLSSkipVerify {
			for _, key := range []string{"server_tls_ca", "server_tls_server_name"} {
				if _, set := pp.keys[key]; set && !pp.bad[key] {
					pp.fail(line, "server_tls_skip_verify", "cannot be true with "+key+": nothing would be verified")
				}
			}
		}
		if p.ServerTLSServerName == "" && !p.ServerTLSSkipVerify && !pp.bad["server_tls_server_name"] && !pp.bad["server_tls_skip_verify"] {
			for _, s := range p.Servers {
				if s.Network == "unix" {
					pp.fail(s.Line, "servers", fmt.Sprintf("%q: a unix socket has no host name to verify; "+
						"set server_tls_server_name", s.Addr))
				}
			}
		}
	}
	if line, ok := pp.keys["server_tls"]; ok && p.ServerTLS && p.Lua != "" {
		pp.fail(line, "server_tls", "a Lua pool's backends come from its route file, which cannot use TLS yet")
	}
	if line, ok := pp.keys["redis_auth_user"]; ok && !pp.bad["redis_auth_user"] {
		switch {
		case !p.Redis && !pp.bad["redis"]:
			pp.fail(line, "redis_auth_user", "is only valid for a redis pool (redis: true)")
		case p.RedisAuth == "" && !pp.bad["redis_auth"]:
			pp.fail(line, "redis_auth_user", "needs redis_auth, the user's password")
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
