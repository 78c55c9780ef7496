// Package fleet makes many proxies act as one through etcd: it reads the
// configuration from etcd and hands each new version to the proxy,
// registers the proxy under a lease, publishes what the proxy sees of its
// ring pools' servers, decides each ring (which servers the fleet ejects)
// and hands every ring version to the proxy.
//
// Keys under the fleet's prefix P:
//
//	P/config                       the configuration YAML (Put writes it)
//	P/proxies/<id>                 leased: who the proxy is, put once a session
//	P/status/<id>                  leased: what it runs (revision, checksum, rings);
//	                               read by `fleet status`, watched by no proxy
//	P/health/<pool>/<server>/<id>  leased while proxy <id> sees the server failing
//	P/ring/<pool>                  {"version": N, "ejected": [...]}
//
// fleet never imports proxy: it drives a Target, which cmd/shardproxy adapts
// to proxy.Server, and a scale simulation to something light. An Agent's
// state is owned by the goroutine of Run; Reread and the accessors may be
// called from any goroutine. etcd unreachable: the Target keeps its last
// configuration and ring, and Run retries with backoff.
package fleet
