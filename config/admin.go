package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// adminSection reads the top-level "shardproxy:" mapping.
func (b *builder) adminSection(n *yaml.Node) {
	const pool = AdminSection
	b.sectionKeys(n, pool, "admin_listen, stats_listen and admin_token", func(k, v *yaml.Node) {
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
		default:
			b.errs.add(k.Line, pool, k.Value, "unknown key; want admin_listen, stats_listen or admin_token")
		}
	})
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
