package resp

import (
	"strings"

	"shardproxy/codec"
)

// CONFIG through a pool whose operator allows it (codec.Options.ServerConfig,
// the pool's redis_config key): GET, SET, RESETSTAT and REWRITE go to every
// server. SET, RESETSTAT and REWRITE answer as Merge answers every RouteAll
// command: +OK when every server said +OK, else the first error in server
// order (a server that said +OK has applied the change; the proxy does not
// undo it). GET answers the servers' parameters merged (mergeConfigGet).
// CONFIG SET of a setting the proxy depends on is refused before it is
// sent (refuseConfigSet).

// Cmd numbers of the CONFIG subcommands the parser and Merge single out.
var (
	cmdConfigGet = lookup("config|get")
	cmdConfigSet = lookup("config|set")
)

// Why a setting may not be changed through the proxy.
const (
	whyAccess  = "the proxy reaches and authenticates to its servers with it"
	whyRepl    = "replicas authenticate to their master with it, and replica reads and failover need them"
	whyAddress = "the proxy dials the addresses its servers announce"
	whyShared  = "with it a server closes or refuses connections the proxy shares between clients"
)

// guardedConfig are the settings CONFIG SET may not change through the
// proxy, by name, or by prefix where the name ends in '-' ("tls-" is every
// TLS setting). Redis's names for them, aliases included; Redis matches
// them in any case.
var guardedConfig = []struct{ name, why string }{
	// How the proxy reaches its servers.
	{"port", whyAccess},
	{"bind", whyAccess},
	{"unixsocket", whyAccess},
	{"unixsocketperm", whyAccess},
	{"protected-mode", whyAccess},
	{"requirepass", whyAccess},
	{"tls-", whyAccess},
	{"masterauth", whyRepl},
	{"masteruser", whyRepl},
	// The addresses a cluster's slot map and a master's replicas give.
	{"cluster-announce-", whyAddress},
	{"cluster-preferred-endpoint-type", whyAddress},
	{"replica-announce-ip", whyAddress},
	{"replica-announce-port", whyAddress},
	{"slave-announce-ip", whyAddress},
	{"slave-announce-port", whyAddress},
	// Limits past which a server drops a client connection: through the
	// proxy, one client's requests would fail everyone's on that socket.
	{"maxclients", whyShared},
	{"timeout", whyShared},
	{"client-output-buffer-limit", whyShared},
	{"client-query-buffer-limit", whyShared},
	{"proto-max-bulk-len", whyShared},
	{"maxmemory-clients", whyShared},
}

// guardedWhy returns why the setting name may not be changed through the
// proxy, or "".
func guardedWhy(name []byte) string {
	for _, g := range guardedConfig {
		if strings.HasSuffix(g.name, "-") {
			if len(name) > len(g.name) && equalFold(name[:len(g.name)], g.name) {
				return g.why
			}
		} else if equalFold(name, g.name) {
			return g.why
		}
	}
	return ""
}

// refuseConfigSet returns the reply refusing the CONFIG SET request in
// p.args when it names a guarded setting, or "". A request with a value
// missing is left to the servers, which answer it a syntax error.
func (p *parser) refuseConfigSet() string {
	if (p.argc()-2)%2 != 0 {
		return ""
	}
	for i := 2; i < p.argc(); i += 2 {
		if why := guardedWhy(p.arg(i)); why != "" {
			return errorLine("CONFIG SET " + strings.ToLower(cString(p.arg(i), 128)) +
				" is not allowed through shardproxy: " + why)
		}
	}
	return ""
}

// mergeConfigGet answers CONFIG GET: every parameter any server reported,
// in the order the first server lists them (a server lists them in its
// hash table's order, which differs from server to server), each with the
// first server's value. Servers may disagree: the settings that name a
// server's own files and ports (port, dir, pidfile, logfile, ...) always
// do, and any setting changed on one server directly. The parameters
// the proxy keeps (its slowlog's) have the proxy's values, which
// AddLocal stored in req. A flat array of names and values in RESP2, a
// map in RESP3, as redis-server answers.
func mergeConfigGet(dst []byte, req *codec.Request, replies []codec.Reply) ([]byte, bool) {
	var fields [][]byte // names and values in turn, each whole
	seen := map[string]bool{}
	local := localConfigFields(req)
	ok := eachField(replies, func(name, field, value []byte) bool {
		if !seen[string(name)] {
			seen[string(name)] = true
			fields = append(fields, field, value)
		}
		return true
	})
	if !ok {
		return dst, false
	}
	for i := 0; i+1 < len(local); i += 2 {
		fields = setConfigField(fields, local[i], local[i+1])
	}
	dst = appendFieldsHeader(dst, len(fields)/2, req.Proto)
	for _, f := range fields {
		dst = append(dst, f...)
	}
	return dst, true
}

// setConfigField gives the field named as the whole frame field the value
// frame value in fields (names and values in turn), appending it when it
// is not there.
func setConfigField(fields [][]byte, field, value []byte) [][]byte {
	name, _, _ := readString(field)
	for j := 0; j+1 < len(fields); j += 2 {
		if n, _, _ := readString(fields[j]); string(n) == string(name) {
			fields[j+1] = value
			return fields
		}
	}
	return append(fields, field, value)
}

// eachField calls fn with each field of every reply, a flat array of
// names and values (RESP2) or a map (RESP3), in order: its name, and the
// name's and the value's whole frames. It reports false when a reply is
// neither or a name is not a string, or when fn does.
func eachField(replies []codec.Reply, fn func(name, field, value []byte) bool) bool {
	for _, r := range replies {
		vals, ok := readFields(r.Raw)
		if !ok {
			return false
		}
		for i := 0; i < len(vals); i += 2 {
			name, null, ok := readString(vals[i])
			if !ok || null || !fn(name, vals[i], vals[i+1]) {
				return false
			}
		}
	}
	return true
}
