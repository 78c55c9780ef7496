package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/fleet"
	"shardproxy/proxy"
)

// fleetFlags are the flags that put the proxy in a fleet (and that the
// fleet command reaches etcd with).
type fleetFlags struct {
	endpoints, prefix, id string
	ca, cert, key         string
	username, password    string
	listenHost            string
	wait                  time.Duration
}

func (f *fleetFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd", "", "etcd endpoints (host:port,host:port): the configuration comes from etcd, and the proxy joins its fleet; the file's fleet: section is the alternative")
	fs.StringVar(&f.prefix, "etcd-prefix", "", "the fleet's key prefix in etcd, /shardproxy/NAME")
	fs.StringVar(&f.id, "fleet-id", "", "this proxy's name in the fleet (default: host name and pid)")
	fs.StringVar(&f.ca, "etcd-ca", "", "PEM file of the CA that signs etcd's certificates (turns TLS on)")
	fs.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key; turns TLS on)")
	fs.StringVar(&f.key, "etcd-key", "", "PEM key of --etcd-cert")
	fs.StringVar(&f.username, "etcd-user", "", "etcd user name (with --etcd-password)")
	fs.StringVar(&f.password, "etcd-password", "", "etcd password")
	fs.StringVar(&f.listenHost, "fleet-listen-host", "", "the host every pool's TCP listen address is bound on, its port kept (several proxies of a fleet on one host: 127.0.0.2, ...)")
	fs.DurationVar(&f.wait, "etcd-wait", 30*time.Second, "without a local configuration: how long to wait for etcd and a configuration in it before giving up")
}

// section returns the fleet the flags describe, or nil without --etcd.
func (f *fleetFlags) section() (*config.Fleet, error) {
	if f.endpoints == "" {
		if f.prefix != "" {
			return nil, errors.New("--etcd-prefix needs --etcd")
		}
		return nil, nil
	}
	fl := &config.Fleet{Endpoints: config.SplitList(f.endpoints), Prefix: f.prefix, ID: f.id,
		TLSCA: f.ca, TLSCert: f.cert, TLSKey: f.key, Username: f.username, Password: f.password,
		ListenHost: f.listenHost}
	if msg := fl.Check(); msg != "" {
		return nil, errors.New("--etcd: " + msg)
	}
	return fl, nil
}

// fleetTarget is fleet.Target over the running proxy: a version from etcd
// goes through op.apply, as a reloaded file does.
type fleetTarget struct {
	ringTarget
	op         *operator
	listenHost string // config.Fleet.ListenHost
}

var _ fleet.Target = fleetTarget{}

// Apply implements fleet.Target. The checksum it returns is the version's
// as published (proxy.Checksum before rehost), the same on every proxy
// that runs it; the proxy's own checksum (stats, /config) is of what it
// runs, its listen host and resolved servers included.
func (t fleetTarget) Apply(cfg *config.Config) (string, error) {
	sum := proxy.Checksum(cfg)
	rehost(cfg, t.listenHost)
	t.op.mu.Lock()
	defer t.op.mu.Unlock()
	res, err := t.op.apply(cfg, "etcd")
	if err == nil {
		t.op.result = res
	}
	return sum, err
}

func (t fleetTarget) Refuse(source string, err error) { t.op.srv.ReloadFailed(source, err) }

// listen returns the proxy's listen addresses, for the registration.
func (t fleetTarget) listen() []string {
	var out []string
	info := t.op.srv.Info()
	if info.Config == nil {
		return nil
	}
	for _, p := range info.Config.Pools {
		if a := t.op.srv.Addr(p.Name); a != nil {
			out = append(out, p.Name+"="+a.String())
		}
	}
	return out
}

// pools returns where clients reach each pool that shows the fleet as a
// Redis Cluster (redis_cluster_view), for the registration: its bound
// address, a wildcard host replaced by this machine's address
// (advertised).
func (t fleetTarget) pools() map[string]string {
	info := t.op.srv.Info()
	if info.Config == nil {
		return nil
	}
	out := map[string]string{}
	for _, p := range info.Config.Pools {
		if a := t.op.srv.Addr(p.Name); a != nil && p.RedisClusterView {
			out[p.Name] = advertised(a.String())
		}
	}
	return out
}

// advertised is addr with a wildcard host (0.0.0.0, ::) replaced by the
// machine's first address that is not a loopback one, which other hosts
// can reach; addr as it is when it has none.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsUnspecified() {
		return addr
	}
	ifaddrs, _ := net.InterfaceAddrs()
	for _, ia := range ifaddrs {
		if ipn, ok := ia.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return net.JoinHostPort(ipn.IP.String(), port)
		}
	}
	return addr
}

// fleetConfig is the configuration a fleet proxy starts on: the local
// file's when it has pools (served until etcd answers), else etcd's,
// waited for up to --etcd-wait. rev is etcd's revision of it (0: the file).
func fleetConfig(fl *config.Fleet, local *config.Config, wait time.Duration, log *slog.Logger) (cfg *config.Config, rev int64, err error) {
	if local != nil && len(local.Pools) > 0 {
		log.Info("serving the local configuration until etcd answers", "conf", local.Source, "fleet", fl.Prefix)
		return local, 0, nil
	}
	conn, err := fleet.ConnOf(fl)
	if err != nil {
		return nil, 0, err
	}
	log.Info("waiting for the configuration in etcd", "fleet", fl.Prefix, "etcd", fl.Endpoints, "wait", wait)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return fleet.Load(ctx, conn, fl.Prefix)
}

// joinFleet starts the proxy's agent in fl; stop ends it, revoking its
// lease.
func joinFleet(fl *config.Fleet, op *operator, rev int64, sum string, log *slog.Logger) (stop func(), err error) {
	conn, err := fleet.ConnOf(fl)
	if err != nil {
		return nil, err
	}
	t := fleetTarget{ringTarget: ringTarget{op.srv}, op: op, listenHost: fl.ListenHost}
	a, err := fleet.New(fleet.Options{Conn: conn, Prefix: fl.Prefix, ID: fl.ID, Target: t, Logger: log,
		ConfigRevision: rev, ConfigChecksum: sum, Version: proxy.Version, Listen: t.listen, Pools: t.pools})
	if err != nil {
		return nil, err
	}
	op.agent = a
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		a.Run(ctx)
		close(done)
	}()
	log.Info("joined the fleet", "fleet", fl.Prefix, "fleet_id", a.ID(), "etcd", fl.Endpoints)
	return func() {
		cancel()
		<-done
		a.Close()
	}, nil
}

// rereadFleet is a reload with a fleet: the configuration etcd holds now,
// applied again.
func (op *operator) rereadFleet(trigger string) (admin.ReloadResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := op.agent.Reread(ctx)
	if err != nil {
		op.log.Warn("reload from etcd failed, old configuration kept", "trigger", trigger, "err", err)
		return admin.ReloadResult{}, err
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	op.log.Info("reloaded from etcd", "trigger", trigger, "revision", rev)
	return op.result, nil
}

// rehost moves every pool's TCP listen address to host, its port kept
// (config.Fleet.ListenHost); "" leaves them.
func rehost(cfg *config.Config, host string) {
	if host == "" {
		return
	}
	move := func(l *config.Listen) {
		if _, port, err := net.SplitHostPort(l.Addr); err == nil && l.Network == "tcp" {
			l.Addr = net.JoinHostPort(host, port)
		}
	}
	for _, p := range cfg.Pools {
		move(&p.Listen)
		for i := range p.ListenTags {
			move(&p.ListenTags[i].Listen)
		}
	}
}
