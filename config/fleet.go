package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// FleetSection is the reserved top-level key of the Fleet section; no pool
// may be called so.
const FleetSection = "fleet"

// Fleet is the top-level "fleet:" section: where this proxy finds the etcd
// cluster its fleet keeps the configuration in, as the --etcd flags say it.
// A file holding it may have no pools: the configuration then comes from
// etcd alone. A configuration stored in etcd may not hold one.
type Fleet struct {
	// Endpoints are the etcd members, "host:port" or a URL (key endpoints: a
	// list, or one string of comma-separated addresses).
	Endpoints []string
	// Prefix is the fleet's key prefix, "/shardproxy/NAME" (key prefix).
	Prefix string
	// ID names this proxy in the fleet (key id); empty: host name and pid.
	ID string
	// TLSCA, TLSCert and TLSKey are PEM files (keys tls_ca, tls_cert,
	// tls_key): the CA that signs etcd's certificates, and this proxy's
	// client certificate and key (both or neither). Any of them turns TLS on.
	TLSCA, TLSCert, TLSKey string
	// Username and Password authenticate to etcd (keys username, password,
	// both or neither).
	Username, Password string
	// ListenHost, if set, replaces the host of every pool's TCP listen
	// address in each configuration the fleet applies, the port kept (key
	// listen_host): several proxies of one fleet on one host, each on its
	// own address (127.0.0.2, 127.0.0.3, ...).
	ListenHost string
}

// fleetKeys maps each key of the fleet: section to where its value goes.
var fleetKeys = map[string]func(f *Fleet) *string{
	"prefix":      func(f *Fleet) *string { return &f.Prefix },
	"id":          func(f *Fleet) *string { return &f.ID },
	"tls_ca":      func(f *Fleet) *string { return &f.TLSCA },
	"tls_cert":    func(f *Fleet) *string { return &f.TLSCert },
	"tls_key":     func(f *Fleet) *string { return &f.TLSKey },
	"username":    func(f *Fleet) *string { return &f.Username },
	"password":    func(f *Fleet) *string { return &f.Password },
	"listen_host": func(f *Fleet) *string { return &f.ListenHost },
}

// fleetSection reads the top-level "fleet:" mapping.
func (b *builder) fleetSection(n *yaml.Node) {
	const pool = FleetSection
	f := &Fleet{}
	ok := b.sectionKeys(n, pool, "endpoints, prefix, id, tls_ca, tls_cert, tls_key, username, password and listen_host", func(k, v *yaml.Node) {
		if k.Value == "endpoints" {
			f.Endpoints = b.fleetEndpoints(v)
			return
		}
		dst, ok := fleetKeys[k.Value]
		switch {
		case !ok:
			b.errs.add(k.Line, pool, k.Value, "unknown key; want endpoints, prefix, id, tls_ca, tls_cert, tls_key, username, password or listen_host")
		case v.Kind != yaml.ScalarNode:
			b.errs.add(v.Line, pool, k.Value, "must be a single value, not "+kindName(v))
		default:
			*dst(f) = v.Value
		}
	})
	if !ok {
		return
	}
	b.checkFleet(n.Line, f)
	b.fleet = f
}

// fleetEndpoints reads endpoints: a block list, or comma-separated.
func (b *builder) fleetEndpoints(v *yaml.Node) []string {
	var eps []string
	switch v.Kind {
	case yaml.ScalarNode:
		eps = SplitList(v.Value)
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode || e.Value == "" {
				b.errs.add(e.Line, FleetSection, "endpoints", "each endpoint must be a host:port")
				return nil
			}
			eps = append(eps, e.Value)
		}
	default:
		b.errs.add(v.Line, FleetSection, "endpoints", "must be a list of host:port, not "+kindName(v))
	}
	return eps
}

// checkFleet checks what the section needs as a whole.
func (b *builder) checkFleet(line int, f *Fleet) {
	if msg := f.Check(); msg != "" {
		b.errs.add(line, FleetSection, "", msg)
	}
}

// Check returns what is wrong with f as a whole ("" when nothing): the
// flags that set a Fleet check it as the section does.
func (f *Fleet) Check() string {
	switch {
	case len(f.Endpoints) == 0:
		return "endpoints: at least one etcd address is needed"
	case !strings.HasPrefix(f.Prefix, "/") || strings.HasSuffix(f.Prefix, "/") || strings.Contains(f.Prefix, "//"):
		return fmt.Sprintf("prefix %q: want a key prefix such as /shardproxy/NAME (leading /, no trailing /)", f.Prefix)
	case strings.Contains(f.ID, "/"):
		return fmt.Sprintf("id %q: must not contain /", f.ID)
	case (f.TLSCert == "") != (f.TLSKey == ""):
		return "tls_cert and tls_key: both or neither"
	case (f.Username == "") != (f.Password == ""):
		return "username and password: both or neither"
	case strings.ContainsAny(f.ListenHost, ":/ "):
		return fmt.Sprintf("listen_host %q: want a host name or an IPv4 address", f.ListenHost)
	}
	return ""
}

// SplitList splits a comma-separated list, dropping blanks around and
// between its items.
func SplitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
