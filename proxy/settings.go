package proxy

import (
	"cmp"
	"net"
	"runtime"
	"strconv"
	"time"

	"shardproxy/codec"
	"shardproxy/config"
)

// settings lists the pool's settings for memcached's "stats settings":
// under memcached's names where the setting means the same (maxconns,
// tcpport, inter, domain_socket, tcp_backlog, num_threads, item_size_max,
// binding_protocol), then the pool's own keys under their configuration
// names.
func (p *pool) settings() []codec.Stat {
	c := p.cfg
	itoa := strconv.Itoa
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	st := []codec.Stat{{Name: "maxconns", Value: itoa(c.ClientConnections)}}
	if c.Listen.Network == "unix" {
		st = append(st, codec.Stat{Name: "domain_socket", Value: c.Listen.Addr})
	} else if host, port, err := net.SplitHostPort(c.Listen.Addr); err == nil {
		st = append(st, codec.Stat{Name: "tcpport", Value: port},
			codec.Stat{Name: "inter", Value: cmp.Or(host, "NULL")})
	}
	st = append(st,
		codec.Stat{Name: "tcp_backlog", Value: itoa(c.Backlog)},
		codec.Stat{Name: "num_threads", Value: itoa(runtime.GOMAXPROCS(0))},
		codec.Stat{Name: "item_size_max", Value: itoa(c.ItemSizeMax)},
		codec.Stat{Name: "binding_protocol", Value: "ascii"},
		codec.Stat{Name: "pool", Value: c.Name},
		codec.Stat{Name: "kind", Value: string(c.Kind())},
	)
	st = append(st, p.kind.Settings(c, p.router)...)
	return append(st,
		codec.Stat{Name: "default_version", Value: cmp.Or(c.DefaultVersion, config.DefaultVersion)},
		codec.Stat{Name: "max_request_line", Value: itoa(c.MaxRequestLine)},
		codec.Stat{Name: "timeout", Value: ms(c.Timeout)},
		codec.Stat{Name: "connect_timeout", Value: ms(c.ConnectTimeout)},
		codec.Stat{Name: "server_connections", Value: itoa(c.ServerConnections)},
		codec.Stat{Name: "server_failure_limit", Value: itoa(c.ServerFailureLimit)},
		codec.Stat{Name: "server_retry_timeout", Value: ms(c.ServerRetryTimeout)},
		codec.Stat{Name: "auto_eject_hosts", Value: yesNo(c.AutoEjectHosts)},
		codec.Stat{Name: "eject_policy", Value: c.EjectPolicy},
		codec.Stat{Name: "flush_all", Value: yesNo(c.AllowFlushAll)},
		codec.Stat{Name: "max_keys", Value: itoa(c.MaxKeys)},
		codec.Stat{Name: "active_req_limit", Value: itoa(c.ActiveReqLimit)},
		codec.Stat{Name: "buffer_memory_limit", Value: itoa(c.BufferMemoryLimit)},
	)
}
