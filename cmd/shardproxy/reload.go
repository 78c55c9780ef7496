package main

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/dnspool"
	"shardproxy/fleet"
	"shardproxy/proxy"
	"shardproxy/tracing"
)

// operator runs the admin servers and the one reload that SIGHUP and
// POST /reload share.
type operator struct {
	path string
	srv  *proxy.Server
	log  *slog.Logger

	stats *admin.StatsServer
	web   *admin.HTTPServer
	// Addresses used when the config's shardproxy: section sets none: -a:-s
	// and --admin ("" serves no HTTP admin).
	statsDefault, webDefault string

	// dns watches the servers_from pools; apply resolves with it.
	dns *dnspool.Group

	mu sync.Mutex // one reload at a time
	// last is the configuration applied last, as its source gave it
	// (servers_from unresolved): a DNS change applies it again.
	last *config.Config

	// agent, with a fleet, is where a reload reads the configuration
	// (etcd, not the file); result is the last apply's, which a reload
	// from etcd answers with (under mu).
	agent  *fleet.Agent
	result admin.ReloadResult

	// drainAsked hears POST /drain: the signal loop drains and exits as
	// on SIGTERM (one pending ask is enough).
	drainAsked chan struct{}

	// traces is the trace_* settings tracer follows; tracer is nil
	// while they trace nothing (trace.go).
	traces config.Traces
	tracer *tracing.Tracer
}

// newOperator returns the operator of srv; listen binds its admin
// listeners (the handover's hook).
func newOperator(o *options, srv *proxy.Server, log *slog.Logger, dns *dnspool.Group, cfg *config.Config,
	listen func(network, addr string) (net.Listener, error)) *operator {
	op := &operator{path: o.conf, srv: srv, log: log, dns: dns, last: cfg, drainAsked: make(chan struct{}, 1)}
	srv.SetSourceStats(dnsStats(dns))
	op.statsDefault, op.webDefault = o.adminDefaults()
	op.stats = admin.NewStats(srv, admin.StatsConfig{
		Interval: time.Duration(o.statsIntvl) * time.Millisecond, Logger: log, Listen: listen})
	op.web = admin.NewHTTP(srv, admin.HTTPConfig{
		Reload: func() (admin.ReloadResult, error) { return op.reload("http") },
		Drain:  op.askDrain, Logger: log, Listen: listen})
	return op
}

// askDrain asks the signal loop to drain and exit (POST /drain).
func (op *operator) askDrain() {
	select {
	case op.drainAsked <- struct{}{}:
	default:
	}
}

// adminDefaults are the admin addresses used when the config's
// shardproxy: section sets none: -a:-s for the stats port, --admin for
// HTTP ("" serves none).
func (o *options) adminDefaults() (stats, web string) {
	return net.JoinHostPort(o.statsAddr, strconv.Itoa(o.statsPort)), o.admin
}

// listen binds the admin servers where cfg says, else at the defaults. At
// start an error is fatal; on reload the caller keeps the old address.
func (op *operator) listen(a config.Admin) []error {
	var errs []error
	if err := op.stats.Listen(or(a.StatsListen, op.statsDefault)); err != nil {
		errs = append(errs, err)
	}
	if err := op.web.Listen(or(a.HTTPListen, op.webDefault)); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkAdmin resolves the addresses listen would bind for a (-t).
func checkAdmin(o *options, a config.Admin) error {
	stats, web := o.adminDefaults()
	if _, err := net.ResolveTCPAddr("tcp", or(a.StatsListen, stats)); err != nil {
		return fmt.Errorf("admin: stats listen %s: %w", or(a.StatsListen, stats), err)
	}
	if addr := or(a.HTTPListen, web); addr != "" {
		if _, err := net.ResolveTCPAddr("tcp", addr); err != nil {
			return fmt.Errorf("admin: http listen %s: %w", addr, err)
		}
	}
	return nil
}

// reload re-reads the config file and applies it. A file that cannot be
// read or parsed is counted with ReloadFailed and changes nothing.
func (op *operator) reload(trigger string) (admin.ReloadResult, error) {
	if op.agent != nil {
		return op.rereadFleet(trigger)
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	cfg, err := config.Load(op.path)
	if err != nil {
		op.srv.ReloadFailed(op.path, err)
		op.log.Warn("reload failed, old configuration kept", "trigger", trigger, "conf", op.path)
		return admin.ReloadResult{}, err
	}
	return op.apply(cfg, trigger)
}

// apply swaps the proxy to cfg, a configuration as its source gave it (the
// file, or another source of versions), through the one reload path:
// Reload counts a refusal. Its servers_from pools run the servers their
// watchers hold now (a copy of cfg; cfg is kept as given, for the next DNS
// change to apply again). Then the admin servers move if cfg moved them;
// an address that cannot be bound keeps the old one and is a warning, not a
// failure, since the proxy already runs cfg. Called with op.mu held.
func (op *operator) apply(cfg *config.Config, trigger string) (admin.ReloadResult, error) {
	start := time.Now()
	run, err := op.dns.Resolve(cfg)
	if err == nil {
		err = op.srv.Reload(run)
	} else {
		op.srv.ReloadFailed(cfg.Source, err)
	}
	if err != nil {
		op.dns.Sync(op.last) // stop the watchers only cfg wanted
		op.log.Warn("reload failed, old configuration kept", "trigger", trigger, "conf", cfg.Source)
		return admin.ReloadResult{}, err
	}
	op.last = cfg
	op.dns.Sync(cfg)
	res := admin.ReloadResult{Source: cfg.Source, Checksum: op.srv.Info().Checksum}
	for _, err := range op.listen(cfg.Admin) {
		op.log.Error("admin address not moved, old one kept", "err", err)
		res.Warnings = append(res.Warnings, err.Error())
	}
	if err := op.trace(cfg.Admin.Traces); err != nil {
		op.log.Error("tracing not changed", "err", err)
		res.Warnings = append(res.Warnings, err.Error())
	}
	res.Took = time.Since(start)
	op.log.Info("reload done", "trigger", trigger, "conf", cfg.Source, "checksum", res.Checksum,
		"warnings", len(res.Warnings), "took", res.Took)
	return res, nil
}

// close stops the admin servers, the DNS watchers and the tracer (its
// queued spans sent first).
func (op *operator) close() {
	op.web.Close()
	op.stats.Close()
	op.dns.Close()
	op.stopTracer()
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
