package admin

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"shardproxy/config"
	"shardproxy/proxy"
)

// Service is the stats JSON's "service" value. It is nutcracker's, because
// exporters and plugins recognise twemproxy's stats by it.
const Service = "nutcracker"

// AppendStats appends st to dst as nutcracker's stats JSON, source being
// the "source" value (the host name). st.Now is the "timestamp", and uptime
// is st.Now - st.Start in whole seconds. The encoding is nutcracker's
// stats_add_* functions: each field is followed by ", ", an object opens
// with `"name": {` and closes with "},", and the last byte is "}\n".
func AppendStats(dst []byte, st proxy.Stats, source string) []byte {
	e := statsEncoder{b: dst}
	e.b = append(e.b, '{')
	e.str("service", Service)
	e.str("source", source)
	e.str("version", st.Version)
	e.num("uptime", int64(st.Now.Sub(st.Start)/time.Second))
	e.num("timestamp", st.Now.Unix())
	e.num("total_connections", st.TotalConnections)
	e.num("curr_connections", st.CurrConnections)
	for _, p := range st.Pools {
		e.begin(p.Name)
		e.num("client_eof", p.ClientEOF)
		e.num("client_err", p.ClientErr)
		e.num("client_connections", p.ClientConnections)
		e.num("server_ejects", p.ServerEjects)
		e.num("forward_error", p.ForwardError)
		e.num("fragments", p.Fragments)
		cl := clusterFields(p)
		for _, s := range p.Servers {
			e.server(s, cl, p.Ring)
		}
		e.end()
	}
	e.footer()
	return e.b
}

// clusterFields are the slot map's figures a redis_cluster pool's server
// objects repeat (pools take no extra fields: see doc.go), or nil.
func clusterFields(p proxy.PoolStats) []int64 {
	if p.Kind != clusterKind {
		return nil
	}
	f := []int64{0, 0, -1}
	for _, r := range p.Router {
		switch r.Name {
		case "cluster_refreshes":
			f[0] = r.Value
		case "cluster_refresh_failures":
			f[1] = r.Value
		case "cluster_slot_map_age_seconds":
			f[2] = r.Value
		}
	}
	return f
}

// clusterKind is PoolStats.Kind of a Redis Cluster pool.
const clusterKind = string(config.KindCluster)

// server writes one server object; cl, when not nil, are its pool's
// clusterFields, after the server's redirect counts; ring, when not nil,
// is its ring pool's ring (ringFields).
func (e *statsEncoder) server(s proxy.ServerStats, cl []int64, ring *proxy.Ring) {
	e.begin(s.Name)
	e.num("server_eof", s.ServerEOF)
	e.num("server_err", s.ServerErr)
	e.num("server_timedout", s.ServerTimedout)
	e.num("server_connections", s.ServerConnections)
	e.num("server_ejected_at", s.ServerEjectedAt)
	e.num("requests", s.Requests)
	e.num("request_bytes", s.RequestBytes)
	e.num("responses", s.Responses)
	e.num("response_bytes", s.ResponseBytes)
	e.num("in_queue", s.InQueue)
	e.num("in_queue_bytes", s.InQueueBytes)
	e.num("out_queue", s.OutQueue)
	e.num("out_queue_bytes", s.OutQueueBytes)
	// shardproxy's, after nutcracker's and integers only (see doc.go).
	e.num("ejects", s.Ejects)
	e.num("state", stateCode(s))
	e.num("failures", int64(s.State.Failures))
	var retry int64
	if s.State.Bad && !s.State.RetryAt.IsZero() {
		retry = s.State.RetryAt.UnixMicro()
	}
	e.num("retry_at", retry)
	e.num("probing", b2i(s.State.Probing))
	e.num("probes", s.Probes)
	e.num("probe_failures", s.ProbeFailures)
	e.num("restores", s.Restores)
	e.num("idle_checks", s.IdleChecks)
	e.num("idle_replaced", s.IdleReplaced)
	if cl != nil {
		e.num("moved", s.Moved)
		e.num("ask", s.Ask)
		e.num("tryagain", s.TryAgain)
		e.num("slot_map_refreshes", cl[0])
		e.num("slot_map_refresh_failures", cl[1])
		e.num("slot_map_age", cl[2])
	}
	if ring != nil {
		e.ringFields(s, ring)
	}
	e.end()
}

// ringFields writes a ring pool's server's "ring_version" (its pool's
// ring's, the same in every server, having nowhere else to go) and
// "ring_ejected" (1 while the ring takes the server out of the pool).
func (e *statsEncoder) ringFields(s proxy.ServerStats, ring *proxy.Ring) {
	e.num("ring_version", ring.Version)
	e.num("ring_ejected", b2i(slices.Contains(ring.Ejected, s.Name)))
}

// statsEncoder writes nutcracker's stats JSON the way src/nc_stats.c does:
// by appending and then overwriting the trailing separator.
type statsEncoder struct{ b []byte }

// str writes `"key":"value", `.
func (e *statsEncoder) str(key, value string) {
	e.b = appendName(e.b, key)
	e.b = append(e.b, ':')
	e.b = appendName(e.b, value)
	e.b = append(e.b, ", "...)
}

// num writes `"key":N, `.
func (e *statsEncoder) num(key string, n int64) {
	e.b = appendName(e.b, key)
	e.b = append(e.b, ':')
	e.b = strconv.AppendInt(e.b, n, 10)
	e.b = append(e.b, ", "...)
}

// begin opens an object: `"name": {`.
func (e *statsEncoder) begin(name string) {
	e.b = appendName(e.b, name)
	e.b = append(e.b, ": {"...)
}

// end closes an object as stats_end_nesting does: a trailing ", " becomes
// "}," and a trailing "}," (an object just closed) becomes "}},". An empty
// object, which nutcracker never writes, becomes "{},".
func (e *statsEncoder) end() {
	n := len(e.b)
	switch {
	case n >= 2 && e.b[n-2] == ',' && e.b[n-1] == ' ':
		e.b = append(e.b[:n-2], "},"...)
	case n >= 2 && e.b[n-2] == '}' && e.b[n-1] == ',':
		e.b = append(e.b[:n-2], "}},"...)
	default:
		e.b = append(e.b, "},"...)
	}
}

// footer ends the document as stats_add_footer does: the last byte (the ","
// after the last pool) becomes "}" and "\n" follows. Without pools, which
// nutcracker cannot have, the trailing ", " goes so the JSON stays valid.
func (e *statsEncoder) footer() {
	n := len(e.b)
	if n >= 2 && e.b[n-2] == ',' && e.b[n-1] == ' ' {
		e.b = e.b[:n-1]
		n--
	}
	e.b = append(e.b[:n-1], "}\n"...)
}

// appendName appends s in double quotes. nutcracker writes names raw; so
// does this, except that it escapes what would make the JSON invalid.
func appendName(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = fmt.Appendf(b, `\u%04x`, c)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}

// statDescriptions are nutcracker's -D text, then shardproxy's extras.
var statDescriptions = []struct{ section, name, desc string }{
	{"pool", "client_eof", "# eof on client connections"},
	{"pool", "client_err", "# errors on client connections"},
	{"pool", "client_connections", "# active client connections"},
	{"pool", "server_ejects", "# times backend server was ejected"},
	{"pool", "forward_error", "# times we encountered a forwarding error"},
	{"pool", "fragments", "# fragments created from a multi-vector request"},
	{"server", "server_eof", "# eof on server connections"},
	{"server", "server_err", "# errors on server connections"},
	{"server", "server_timedout", "# timeouts on server connections"},
	{"server", "server_connections", "# active server connections"},
	{"server", "server_ejected_at", "timestamp when server was ejected in usec since epoch"},
	{"server", "requests", "# requests"},
	{"server", "request_bytes", "total request bytes"},
	{"server", "responses", "# responses"},
	{"server", "response_bytes", "total response bytes"},
	{"server", "in_queue", "# requests in incoming queue"},
	{"server", "in_queue_bytes", "current request bytes in incoming queue (always 0)"},
	{"server", "out_queue", "# requests in outgoing queue"},
	{"server", "out_queue_bytes", "current request bytes in outgoing queue (always 0)"},
	{"server", "ejects", "# times the server was marked bad (shardproxy)"},
	{"server", "state", "0 up, 1 failing, 2 bad (shardproxy)"},
	{"server", "failures", "# consecutive failures (shardproxy)"},
	{"server", "retry_at", "timestamp when a bad server is retried in usec since epoch, else 0 (shardproxy)"},
	{"server", "moved", "# MOVED replies the node sent, followed (shardproxy, redis_cluster pools)"},
	{"server", "ask", "# ASK replies the node sent, followed (shardproxy, redis_cluster pools)"},
	{"server", "tryagain", "# TRYAGAIN replies the node sent, retried (shardproxy, redis_cluster pools)"},
	{"server", "slot_map_refreshes", "# slot maps the pool read (shardproxy, redis_cluster pools; the pool's, in every node)"},
	{"server", "slot_map_refresh_failures", "# refreshes in which no node gave a slot map (shardproxy, redis_cluster pools; the pool's)"},
	{"server", "slot_map_age", "seconds since the pool's slot map was read, -1 before the first (shardproxy, redis_cluster pools)"},
	{"server", "ring_version", "version of the fleet's ring the pool runs (shardproxy, ring pools under a fleet; the pool's)"},
	{"server", "ring_ejected", "1 while the fleet's ring takes the server out of the pool, else 0 (shardproxy, ring pools)"},
}

// WriteDescription writes the stats description that -D prints, in
// nutcracker's layout.
func WriteDescription(w io.Writer) error {
	var b []byte
	section := ""
	for _, d := range statDescriptions {
		if d.section != section {
			if section != "" {
				b = append(b, '\n')
			}
			section = d.section
			b = fmt.Appendf(b, "%s stats:\n", section)
		}
		b = fmt.Appendf(b, "  %-19s \"%s\"\n", d.name, d.desc)
	}
	_, err := w.Write(b)
	return err
}

// b2i is 1 for true, 0 for false: the stats port's fields are integers.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
