package config

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// poolParser reads one pool's mapping.
type poolParser struct {
	b    *builder
	p    *Pool
	keys map[string]int  // key -> line where it was set
	bad  map[string]bool // keys whose value was rejected
	// sentinel: the pool has a sentinels key, so its servers lines name
	// Sentinel masters (parseMaster), not addresses.
	sentinel bool
}

// setter reads the value of one pool key into the pool.
type setter func(pp *poolParser, key string, v *yaml.Node)

// poolKey is one key a pool may have.
type poolKey struct {
	// set reads the key's YAML value into the pool.
	set setter
	// given reports whether a Pool built in Go sets the key: whether the
	// key's field holds something other than its zero value (see IsSet).
	given func(*Pool) bool
	// value is the key's value as Marshal writes it (encode.go).
	value func(*Pool) *yaml.Node
	// omit reports whether Marshal leaves the key out: a twemproxy key at
	// an empty value, an extension at its default, a key the pool's
	// other keys make meaningless. nil: the key is always written.
	omit func(*Pool) bool
}

// encodedAs returns k with value as how Marshal writes it.
func (k poolKey) encodedAs(value func(*Pool) *yaml.Node) poolKey {
	k.value = value
	return k
}

// omitIf returns k, which Marshal also leaves out when omit says so.
func (k poolKey) omitIf(omit func(*Pool) bool) poolKey {
	if prev := k.omit; prev != nil {
		k.omit = func(p *Pool) bool { return prev(p) || omit(p) }
	} else {
		k.omit = omit
	}
	return k
}

// onlyIf returns k, which Marshal writes only where cond holds.
func (k poolKey) onlyIf(cond func(*Pool) bool) poolKey {
	return k.omitIf(func(p *Pool) bool { return !cond(p) })
}

// omitAt returns k, which Marshal leaves out when field holds one of values.
func omitAt[T comparable](k poolKey, field func(*Pool) *T, values []T) poolKey {
	if len(values) == 0 {
		return k
	}
	return k.omitIf(func(p *Pool) bool { return slices.Contains(values, *field(p)) })
}

// poolKeys are the keys a pool may have, twemproxy's (src/nc_conf.c
// conf_commands, with tcpkeepalive and reuseport of later versions) and the
// shardproxy extensions, each in the table of the file that owns it: keys
// every pool reads (pool_common.go), the keys of a native sharded pool
// (pool_native.go) and its near cache (pool_near.go), of a redis_cluster pool (pool_cluster.go), the
// replica keys of both Redis kinds (pool_replica.go), of a Lua pool
// (pool_lua.go), the TLS and ACL keys (security.go), the Sentinel keys
// of a sharded redis pool (pool_sentinel.go), servers_from (pool_dns.go), and delete_spool (pool_spool.go). Each kind's rules
// (KindRules, in the kind's package) say what it does with the keys of
// the others.
var poolKeys = joinKeys(commonKeys, nativeKeys, nearKeys, clusterKeys, replicaKeys, luaKeys, securityKeys, sentinelKeys, dnsKeys, spoolKeys, routeKeys, slowlogKeys)

// joinKeys merges key tables; a key in two of them is a programming error.
func joinKeys(tables ...map[string]poolKey) map[string]poolKey {
	all := make(map[string]poolKey)
	for _, t := range tables {
		for k, v := range t {
			if _, dup := all[k]; dup {
				panic("config: pool key " + k + " is in two tables")
			}
			all[k] = v
		}
	}
	return all
}

// IsSet reports whether the pool sets key, a pool key as YAML spells it
// ("server_retry_timeout").
//
// For a Pool from Parse, IsSet reports whether the key was in the file,
// whatever its value: a key set to its default value is set, and an absent
// key is not, though Parse gave its field the default value. A copy of such a
// Pool answers the same, whatever is changed in the copy.
//
// A Pool built in Go has no file: there a key is set when its field is not
// its zero value (Servers not empty for servers), which is the rule the
// fields' comments give for a Pool built by hand, where zero means the
// default. An explicit zero (server_retry_timeout: 0) is therefore set in a
// parsed Pool and not in a built one.
//
// IsSet panics if key is not a pool key: a misspelt name would otherwise
// read as "not set" everywhere.
func (p *Pool) IsSet(key string) bool {
	k, ok := poolKeys[key]
	if !ok {
		panic(fmt.Sprintf("config: IsSet(%q): not a pool key", key))
	}
	if p.set != nil {
		return p.set[key]
	}
	return k.given(p)
}

// nonZero returns a Pool's "field is not zero" test for IsSet.
func nonZero[T comparable](field func(*Pool) *T) func(*Pool) bool {
	return func(p *Pool) bool {
		var zero T
		return *field(p) != zero
	}
}

// keyOf is a key read by set into the field that IsSet looks at.
func keyOf[T comparable](set setter, field func(*Pool) *T) poolKey {
	return poolKey{set: set, given: nonZero(field)}
}

// pool reads the pool called name, whose name is on line; it returns nil
// when the value is not a mapping.
func (b *builder) pool(name string, line int, n *yaml.Node) *Pool {
	if !b.plain(n, name, "") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		b.errs.add(n.Line, name, "", "must be a mapping of keys such as listen and servers, not "+kindName(n))
		return nil
	}
	pp := &poolParser{b: b, p: newPool(name, line), keys: make(map[string]int), bad: make(map[string]bool),
		sentinel: hasSentinels(n)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		pp.entry(n.Content[i], n.Content[i+1])
	}
	pp.finish()
	return pp.p
}

// newPool returns a pool holding every default of every kind; a kind's
// Provision changes the few that depend on the pool's other keys.
func newPool(name string, line int) *Pool {
	return &Pool{
		Name:                name,
		Line:                line,
		Hash:                DefaultHash,
		Distribution:        DefaultDistribution,
		Backlog:             DefaultBacklog,
		ServerConnections:   DefaultServerConnections,
		ServerRetryTimeout:  DefaultServerRetryTimeout,
		HealthCheckInterval: DefaultHealthCheckInterval,
		HealthCheckTimeout:  DefaultHealthCheckTimeout,
		ServerFailureLimit:  DefaultServerFailureLimit,
		ItemSizeMax:         DefaultItemSizeMax,
		MaxRequestLine:      DefaultMaxRequestLine,
		AllowFlushAll:       DefaultFlushAll,
		EjectPolicy:         DefaultEjectPolicy,
		ServerProtocol:      DefaultServerProtocol,
		BlockingConnections: DefaultBlockingConnections,
		DefaultVersion:      DefaultVersion,
		SlowlogThreshold:    DefaultSlowlogThreshold,
		SlowlogMaxLen:       DefaultSlowlogMaxLen,
	}
}

// entry reads one "key: value" of the pool.
func (pp *poolParser) entry(k, v *yaml.Node) {
	if !pp.b.plain(k, pp.p.Name, "") {
		return
	}
	if k.Kind != yaml.ScalarNode {
		pp.b.errs.add(k.Line, pp.p.Name, "", "a key must be a single value, not "+kindName(k))
		return
	}
	key := k.Value
	if line, dup := pp.keys[key]; dup {
		pp.fail(k.Line, key, fmt.Sprintf("duplicate key (first at line %d)", line))
		return
	}
	pp.keys[key] = k.Line
	pk, ok := poolKeys[key]
	if !ok {
		pp.fail(k.Line, key, "unknown key")
		return
	}
	if !pp.b.plain(v, pp.p.Name, key) {
		pp.bad[key] = true
		return
	}
	pk.set(pp, key, v)
}

// finish checks what involves several keys, the rules every pool follows
// and then its kind's (KindRules), and fills the derived defaults.
func (pp *poolParser) finish() {
	pp.p.set = make(map[string]bool, len(pp.keys))
	for key := range pp.keys {
		if _, ok := poolKeys[key]; ok {
			pp.p.set[key] = true
		}
	}
	k := pp.p.Kind()
	rules, ok := kinds.rules(k)
	if !ok {
		pp.b.errs.add(pp.p.Line, pp.p.Name, "", fmt.Sprintf("no package linked into this program checks or builds "+
			"a pool of kind %s (the proxy links every kind: proxy/kinds.go)", k))
		return
	}
	pp.validateCommon()
	rules.Validate(&PoolCheck{pp: pp})
	pp.validateSecurity()
	pp.provisionCommon()
	if rules.Provision != nil {
		rules.Provision(pp.p)
	}
}

// has reports whether the pool has key, whatever its value.
func (pp *poolParser) has(key string) bool {
	_, ok := pp.keys[key]
	return ok
}

// fail records a problem with key's value.
func (pp *poolParser) fail(line int, key, msg string) {
	pp.bad[key] = true
	pp.b.errs.add(line, pp.p.Name, key, msg)
}

// scalar returns v's text; twemproxy reads every value as its text, quoted
// or not.
func (pp *poolParser) scalar(key string, v *yaml.Node) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		pp.fail(v.Line, key, "must be a single value, not "+kindName(v))
		return "", false
	}
	return v.Value, true
}

// integer reads a decimal number within [min, max].
func (pp *poolParser) integer(key string, v *yaml.Node, min, max int) (int, bool) {
	s, ok := pp.scalar(key, v)
	if !ok {
		return 0, false
	}
	if !allDigits(s) {
		pp.fail(v.Line, key, fmt.Sprintf("%q is not a number", s))
		return 0, false
	}
	n, ok := parseDecimal(s, min, max)
	if !ok {
		pp.fail(v.Line, key, fmt.Sprintf("%s is out of range [%d, %d]", s, min, max))
	}
	return n, ok
}

// intKey is a key setting an int field to a number within [min, max].
// Marshal leaves it out when the field holds one of omit.
func intKey(field func(*Pool) *int, min, max int, omit ...int) poolKey {
	k := keyOf(func(pp *poolParser, key string, v *yaml.Node) {
		if n, ok := pp.integer(key, v, min, max); ok {
			*field(pp.p) = n
		}
	}, field).encodedAs(func(p *Pool) *yaml.Node { return num(strconv.Itoa(*field(p))) })
	return omitAt(k, field, omit)
}

// msKey is a key setting a duration field to a number of milliseconds >=
// min. Marshal leaves it out when the field holds one of omit.
func msKey(field func(*Pool) *time.Duration, min int, omit ...time.Duration) poolKey {
	k := keyOf(func(pp *poolParser, key string, v *yaml.Node) {
		if n, ok := pp.integer(key, v, min, maxInt32); ok {
			*field(pp.p) = time.Duration(n) * time.Millisecond
		}
	}, field).encodedAs(func(p *Pool) *yaml.Node { return num(millis(*field(p))) })
	return omitAt(k, field, omit)
}

// stringKey is a key setting a string field to a scalar that check
// accepts: check returns why it refuses a value, or "". Marshal leaves it
// out when the field holds one of omit.
func stringKey(field func(*Pool) *string, check func(string) string, omit ...string) poolKey {
	k := keyOf(func(pp *poolParser, key string, v *yaml.Node) {
		s, ok := pp.scalar(key, v)
		if !ok {
			return
		}
		if msg := check(s); msg != "" {
			pp.fail(v.Line, key, msg)
			return
		}
		*field(pp.p) = s
	}, field).encodedAs(func(p *Pool) *yaml.Node { return str(*field(p)) })
	return omitAt(k, field, omit)
}

// anyString is a stringKey check that accepts every string.
func anyString(string) string { return "" }

// nonEmpty is a stringKey check that refuses "" with msg.
func nonEmpty(msg string) func(string) string {
	return func(s string) string {
		if s == "" {
			return msg
		}
		return ""
	}
}

// oneOf is a stringKey check that accepts one of names and refuses any
// other as an unknown what.
func oneOf(what string, names []string) func(string) string {
	return func(s string) string {
		if slices.Contains(names, s) {
			return ""
		}
		return fmt.Sprintf("unknown %s %q", what, s)
	}
}

// boolKey is a key setting a bool field from exactly true or false, as
// twemproxy's conf_set_bool does (no yes/no/on/off). Marshal leaves it out
// when the field holds one of omit.
func boolKey(field func(*Pool) *bool, omit ...bool) poolKey {
	k := keyOf(func(pp *poolParser, key string, v *yaml.Node) {
		s, ok := pp.scalar(key, v)
		if !ok {
			return
		}
		switch s {
		case "true":
			*field(pp.p) = true
		case "false":
			*field(pp.p) = false
		default:
			pp.fail(v.Line, key, fmt.Sprintf("%q is not true or false", s))
		}
	}, field).encodedAs(func(p *Pool) *yaml.Node { return boolean(*field(p)) })
	return omitAt(k, field, omit)
}
