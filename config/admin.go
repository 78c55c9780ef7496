package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// adminSection reads the top-level "shardproxy:" mapping.
func (b *builder) adminSection(n *yaml.Node) {
	const pool = AdminSection
	if !b.plain(n, pool, "") {
		return
	}
	if n.Kind != yaml.MappingNode {
		b.errs.add(n.Line, pool, "", "must be a mapping of admin_listen, stats_listen and admin_token, not "+kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !b.plain(k, pool, "") || !b.plain(v, pool, k.Value) {
			continue
		}
		if line, dup := seen[k.Value]; dup {
			b.errs.add(k.Line, pool, k.Value, fmt.Sprintf("duplicate key (first at line %d)", line))
			continue
		}
		seen[k.Value] = k.Line
		if v.Kind != yaml.ScalarNode {
			b.errs.add(v.Line, pool, k.Value, "must be a single value, not "+kindName(v))
			continue
		}
		switch k.Value {
		case "stats_listen", "admin_listen":
			l, msg := parseListen(v.Value)
			if msg == "" && l.Network != "tcp" {
				msg = "must be host:port"
			}
			if msg != "" {
				b.errs.add(v.Line, pool, k.Value, msg)
				continue
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
	}
}
