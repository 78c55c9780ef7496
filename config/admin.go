package config

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// adminSection reads the top-level "shardproxy:" mapping.
func (b *builder) adminSection(n *yaml.Node) {
	const pool = AdminSection
	sampled := false
	defer func() {
		if t := &b.admin.Traces; t.Endpoint != "" && !sampled {
			t.Sample = DefaultTraceSample
		}
	}()
	b.sectionKeys(n, pool, "admin_listen, stats_listen, admin_token and trace_*", func(k, v *yaml.Node) {
		if v.Kind != yaml.ScalarNode {
			b.errs.add(v.Line, pool, k.Value, "must be a single value, not "+kindName(v))
			return
		}
		switch k.Value {
		case "stats_listen", "admin_listen":
			l, msg := parseListen(v.Value)
			if msg == "" && l.Network != "tcp" {
				msg = "must be host:port"
			}
			if msg != "" {
				b.errs.add(v.Line, pool, k.Value, msg)
				return
			}
			if k.Value == "stats_listen" {
				b.admin.StatsListen = l.Addr
			} else {
				b.admin.HTTPListen = l.Addr
			}
		case "admin_token":
			b.admin.Token = v.Value
		case "trace_endpoint", "trace_sample", "trace_slow", "trace_service":
			sampled = sampled || k.Value == "trace_sample"
			if msg := setTrace(&b.admin.Traces, k.Value, v.Value); msg != "" {
				b.errs.add(v.Line, pool, k.Value, msg)
			}
		default:
			b.errs.add(k.Line, pool, k.Value, "unknown key; want admin_listen, stats_listen, admin_token, trace_endpoint, trace_sample, trace_slow or trace_service")
		}
	})
}

// setTrace sets the trace_* key to s, or returns why it cannot.
func setTrace(t *Traces, key, s string) string {
	switch key {
	case "trace_endpoint":
		if msg := traceEndpoint(s); msg != "" {
			return msg
		}
		t.Endpoint = s
	case "trace_sample":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Sprintf("%q is no share between 0 and 1", s)
		}
		t.Sample = f
	case "trace_slow":
		if s != "true" && s != "false" {
			return fmt.Sprintf("%q is not true or false", s)
		}
		t.SlowOff = s == "false"
	case "trace_service":
		t.Service = s
	}
	return ""
}

// traceEndpoint checks an OTLP/HTTP endpoint: an http(s) URL with a host,
// or host:port.
func traceEndpoint(s string) string {
	if !strings.Contains(s, "://") {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return fmt.Sprintf("%q is no URL (http://host:4318) or host:port", s)
		}
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Sprintf("%q is no http or https URL with a host", s)
	}
	return ""
}

// sectionKeys walks a top-level section that is no pool (shardproxy:,
// fleet:): n must be a mapping (keys names what it may hold, for the
// error); each key that is plain and not a duplicate is handed to f with
// its value. It reports whether n was a mapping.
func (b *builder) sectionKeys(n *yaml.Node, section, keys string, f func(k, v *yaml.Node)) bool {
	if !b.plain(n, section, "") {
		return false
	}
	if n.Kind != yaml.MappingNode {
		b.errs.add(n.Line, section, "", "must be a mapping of "+keys+", not "+kindName(n))
		return false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !b.plain(k, section, "") || !b.plain(v, section, k.Value) {
			continue
		}
		if line, dup := seen[k.Value]; dup {
			b.errs.add(k.Line, section, k.Value, fmt.Sprintf("duplicate key (first at line %d)", line))
			continue
		}
		seen[k.Value] = k.Line
		f(k, v)
	}
	return true
}
