package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds what Load reads; real configurations are a few KiB.
const maxFileSize = 16 << 20

// Load reads and parses the configuration file at path. Errors name path as
// given.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if len(data) > maxFileSize {
		return nil, &Error{Source: path, Msg: "file is larger than 16 MiB"}
	}
	return Parse(data, path)
}

// Parse parses a nutcracker.yml held in data. source names it in errors and
// becomes Config.Source; "" means Inline. Parse reports up to ten problems,
// joined with errors.Join, each an *Error; it returns a Config only when there
// are none.
func Parse(data []byte, source string) (*Config, error) {
	if source == "" {
		source = Inline
	}
	b := &builder{errs: errorList{source: source}}
	doc, line, msg := decodeYAML(data)
	if msg != "" {
		b.errs.add(line, "", "", msg)
		return nil, b.errs.err()
	}
	c := &Config{Source: source, Pools: b.config(doc)}
	c.Admin, c.Fleet = b.admin, b.fleet
	if err := b.errs.err(); err != nil {
		return nil, err
	}
	return c, nil
}

// decodeYAML parses the single YAML document twemproxy requires. It returns
// nil for an input without any document.
func decodeYAML(data []byte) (doc *yaml.Node, line int, msg string) {
	defer func() {
		// yaml.v3 panics on a few inputs it considers impossible; input
		// must never crash the proxy.
		if r := recover(); r != nil {
			doc, line, msg = nil, 0, fmt.Sprintf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first yaml.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, ""
		}
		line, msg = yamlError(err)
		return nil, line, msg
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &first, 0, ""
	case err != nil:
		line, msg = yamlError(err)
		return nil, line, msg
	}
	return nil, next.Line, "more than one YAML document; twemproxy reads exactly one"
}

// yamlError takes the line out of a yaml.v3 message ("yaml: line 3: ...").
func yamlError(err error) (int, string) {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "yaml: line ")
	if !ok {
		return 0, msg
	}
	num, text, ok := strings.Cut(rest, ": ")
	n, convErr := strconv.Atoi(num)
	if !ok || convErr != nil {
		return 0, msg
	}
	return n, "yaml: " + text
}

// builder turns a YAML tree into pools, collecting problems.
type builder struct {
	admin     Admin
	fleet     *Fleet
	errs      errorList
	listens   []listenAt
	failovers []listenAt // pools with failover_pool, at that key's line
	// routed are the names a route key names, read before the pools: a
	// pool a route names may have no listen.
	routed map[string]bool
}

// listenAt remembers where a pool's valid listen value was, to report
// duplicates.
type listenAt struct {
	pool *Pool
	line int
}

// config reads the top-level mapping of pool names to pools.
func (b *builder) config(doc *yaml.Node) []*Pool {
	if doc == nil || len(doc.Content) == 0 {
		b.errs.add(0, "", "", "no pools")
		return nil
	}
	root := doc.Content[0]
	if !b.plain(root, "", "") {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		b.errs.add(root.Line, "", "", "the top level must map pool names to pools")
		return nil
	}
	if len(root.Content) == 0 {
		b.errs.add(root.Line, "", "", "no pools")
		return nil
	}
	var pools []*Pool
	first := make(map[string]int)
	b.routed = routedNames(root)
	for i := 0; i+1 < len(root.Content) && !b.errs.full(); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if !b.plain(k, "", "") {
			continue
		}
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			b.errs.add(k.Line, "", "", "a pool name must be a non-empty string")
			continue
		}
		if line, dup := first[k.Value]; dup {
			b.errs.add(k.Line, k.Value, "", fmt.Sprintf("duplicate pool name (first at line %d)", line))
			continue
		}
		if k.Value == AdminSection {
			first[k.Value] = k.Line
			b.adminSection(v)
			continue
		}
		if k.Value == FleetSection {
			first[k.Value] = k.Line
			b.fleetSection(v)
			continue
		}
		first[k.Value] = k.Line
		if p := b.pool(k.Value, k.Line, v); p != nil {
			pools = append(pools, p)
		}
	}
	b.checkListens()
	b.checkFailovers(pools)
	b.checkRoutes(pools)
	slices.SortFunc(pools, func(a, b *Pool) int { return compareNames(a.Name, b.Name) })
	return pools
}

// checkListens rejects two pools on one address. twemproxy compares the
// listen strings; comparing the parsed addresses also catches the same socket
// path with two permissions.
func (b *builder) checkListens() {
	seen := make(map[Listen]listenAt)
	for _, l := range b.listens {
		key := Listen{Network: l.pool.Listen.Network, Addr: l.pool.Listen.Addr}
		if strings.HasSuffix(key.Addr, ":0") && key.Network == "tcp" {
			continue // every port-0 listener gets its own free port
		}
		if prev, dup := seen[key]; dup {
			b.errs.add(l.line, l.pool.Name, "listen", fmt.Sprintf("%s is also the listen address of pool %q (line %d)",
				key.Addr, prev.pool.Name, prev.line))
			continue
		}
		seen[key] = l
	}
}

// checkFailovers checks that every failover_pool names another pool of the
// same protocol.
func (b *builder) checkFailovers(pools []*Pool) {
	for _, f := range b.failovers {
		i := slices.IndexFunc(pools, func(p *Pool) bool { return p.Name == f.pool.FailoverPool })
		switch {
		case i < 0:
			b.errs.add(f.line, f.pool.Name, "failover_pool", fmt.Sprintf("no pool is called %q", f.pool.FailoverPool))
		case pools[i].Redis != f.pool.Redis:
			b.errs.add(f.line, f.pool.Name, "failover_pool", fmt.Sprintf("pool %q speaks another protocol", f.pool.FailoverPool))
		case pools[i].RedisCluster:
			b.errs.add(f.line, f.pool.Name, "failover_pool", fmt.Sprintf("pool %q is a redis_cluster pool, which has no servers to pick from", f.pool.FailoverPool))
		case pools[i].Lua != "":
			b.errs.add(f.line, f.pool.Name, "failover_pool", fmt.Sprintf("pool %q is a Lua pool, which has no servers to pick from", f.pool.FailoverPool))
		case pools[i].ServerProtocol != f.pool.ServerProtocol:
			b.errs.add(f.line, f.pool.Name, "failover_pool", fmt.Sprintf("pool %q has server_protocol %s, this pool %s: "+
				"a request is written once, for both", f.pool.FailoverPool, pools[i].ServerProtocol, f.pool.ServerProtocol))
		}
	}
}

// plain rejects the YAML features twemproxy refuses (conf_validate_tokens):
// aliases, anchors, tags and flow collections.
func (b *builder) plain(n *yaml.Node, pool, key string) bool {
	var msg string
	switch {
	case n.Kind == yaml.AliasNode:
		msg = "YAML aliases are not supported (twemproxy refuses them)"
	case n.Anchor != "":
		msg = "YAML anchors are not supported (twemproxy refuses them)"
	case n.Style&yaml.TaggedStyle != 0:
		msg = "YAML tags are not supported (twemproxy refuses them)"
	case n.Style&yaml.FlowStyle != 0:
		msg = "YAML flow style ({...}, [...]) is not supported (twemproxy refuses it); use block style"
	default:
		return true
	}
	b.errs.add(n.Line, pool, key, msg)
	return false
}

// kindName names a node's kind for messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "something else"
}
