// Command shardproxy is a cache proxy for memcached and Redis fleets and a
// drop-in replacement for twemproxy (nutcracker): it reads the same YAML and
// accepts the same command-line flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"shardproxy/admin"
	"shardproxy/config"
	"shardproxy/dnspool"
	"shardproxy/proxy"
)

// options are the command-line flags, named as nutcracker names them.
type options struct {
	conf        string
	test        bool
	verbosity   int
	output      string
	statsPort   int
	statsAddr   string
	statsIntvl  int
	pidFile     string
	mbufSize    int
	showVersion bool
	daemonize   bool
	describe    bool
	drain       time.Duration
	admin       string
	threads     int

	confSet bool       // -c was given
	inFleet bool       // the proxy runs in a fleet: its ring pools follow the fleet's ring
	fleet   fleetFlags // --etcd and the flags that go with it
	// fleetSection is the fleet the flags describe (nil: no --etcd).
	fleetSection *config.Fleet
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("shardproxy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.conf, "c", "conf/nutcracker.yml", "configuration file (twemproxy YAML)")
	fs.BoolVar(&o.test, "t", false, "test the configuration for syntax errors and exit")
	fs.IntVar(&o.verbosity, "v", 5, "log level, nutcracker's scale 0..11 (5 = info, 6+ = debug, 4 = warn, <4 = error)")
	fs.StringVar(&o.output, "o", "", "log to this file instead of stderr")
	fs.IntVar(&o.statsPort, "s", 22222, "stats monitoring port (the config's shardproxy: stats_listen overrides -a and -s)")
	fs.StringVar(&o.statsAddr, "a", "0.0.0.0", "stats monitoring address")
	fs.IntVar(&o.statsIntvl, "i", 30000, "stats aggregation interval in msec")
	fs.StringVar(&o.pidFile, "p", "", "write the process id to this file")
	fs.IntVar(&o.mbufSize, "m", 16384, "accepted for nutcracker compatibility; buffers size themselves")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&o.showVersion, "V", false, "print the version and exit")
	fs.BoolVar(&o.daemonize, "d", false, "not supported: run under a service manager instead")
	fs.BoolVar(&o.describe, "D", false, "print the stats description and exit")
	fs.DurationVar(&o.drain, "shutdown-timeout", 30*time.Second, "on SIGTERM/SIGINT or POST /drain, how long to let in-flight requests finish before cutting the connections left")
	fs.StringVar(&o.admin, "admin", admin.DefaultHTTPAddr, "HTTP admin address (/metrics, /config, /backends, /version, POST /reload); \"\" serves none; the config's shardproxy: admin_listen overrides it")
	fs.IntVar(&o.threads, "threads", 0, "threads that run the proxy at once (GOMAXPROCS); 0: the GOMAXPROCS environment variable if set, else half the cores the process may use (at least 1)")
	o.fleet.add(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	fs.Visit(func(f *flag.Flag) { o.confSet = o.confSet || f.Name == "c" })
	var err error
	if o.fleetSection, err = o.fleet.section(); err != nil {
		return nil, err
	}
	if o.threads < 0 {
		return nil, fmt.Errorf("-threads %d: want 0 (the default) or more", o.threads)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return o, nil
}

func logLevel(v int) slog.Level {
	switch {
	case v >= 6:
		return slog.LevelDebug
	case v == 5:
		return slog.LevelInfo
	case v == 4:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fleet" {
		return fleetCommand(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "tap" {
		return tapCommand(args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		fmt.Fprintln(stderr, "shardproxy:", err)
		return 2
	}
	if code, exit := earlyExit(o, stdout, stderr); exit {
		return code
	}
	logOut, closeLog, err := openLog(o.output, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "shardproxy:", err)
		return 1
	}
	defer closeLog()
	log := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: logLevel(o.verbosity)}))
	slog.SetDefault(log)

	// With --etcd and no -c there is no local file: the configuration
	// comes from etcd alone.
	var cfg *config.Config
	if o.fleetSection == nil || o.confSet || o.test {
		if cfg, err = config.Load(o.conf); err != nil {
			fmt.Fprintf(stderr, "shardproxy: configuration file '%s' syntax is invalid: %v\n", o.conf, err)
			return 1
		}
	}
	if o.test {
		return testConfig(o, cfg, log, stdout, stderr)
	}
	fl := o.fleetSection
	if fl == nil && cfg != nil {
		fl = cfg.Fleet
	}
	return serve(o, cfg, fl, log)
}

// earlyExit answers the flags that end the command before it reads the
// configuration: -V and -D print, -d is refused.
func earlyExit(o *options, stdout, stderr io.Writer) (code int, exit bool) {
	switch {
	case o.showVersion:
		fmt.Fprintf(stdout, "This is shardproxy-%s\n", proxy.Version)
		return 0, true
	case o.describe:
		fmt.Fprintf(stdout, "This is shardproxy-%s\n\n", proxy.Version)
		admin.WriteDescription(stdout)
		return 0, true
	case o.daemonize:
		fmt.Fprintln(stderr, "shardproxy: -d is not supported; run it under systemd or another supervisor")
		return 2, true
	}
	return 0, false
}

// openLog returns where the log goes: the file named by -o, opened for
// appending, or stderr; closeLog closes the file.
func openLog(output string, stderr io.Writer) (w io.Writer, closeLog func(), err error) {
	if output == "" {
		return stderr, func() {}, nil
	}
	f, err := os.OpenFile(output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

// testConfig is -t: what start checks, short of binding: servers_from
// names resolved, pools built and closed (route files run, TLS files
// read), addresses resolved.
func testConfig(o *options, cfg *config.Config, log *slog.Logger, stdout, stderr io.Writer) int {
	err := checkPools(cfg, log)
	if err == nil {
		err = checkAdmin(o, cfg.Admin)
	}
	if err != nil {
		fmt.Fprintf(stderr, "shardproxy: configuration file '%s' syntax is invalid: %v\n", o.conf, err)
		return 1
	}
	fmt.Fprintf(stdout, "shardproxy: configuration file '%s' syntax is ok\n", o.conf)
	return 0
}

// checkPools is what -t and fleet put check of a configuration's pools:
// the servers_from pools resolved (each waits for its first answer), then
// every pool built and closed.
func checkPools(cfg *config.Config, log *slog.Logger) error {
	dns := dnspool.New(dnspool.Config{Logger: log})
	run, err := dns.Resolve(cfg)
	dns.Close()
	if err != nil {
		return err
	}
	return proxy.Check(run, proxy.Options{Logger: log})
}

// serve runs the proxy until SIGTERM, SIGINT or POST /drain, reloading
// it on SIGHUP and handing it over to a new process on SIGUSR2
// (upgrade.go), then drains it (proxy.Server.Drain) for at most
// -shutdown-timeout.
func serve(o *options, cfg *config.Config, fl *config.Fleet, log *slog.Logger) int {
	runtime.GOMAXPROCS(threads(o.threads, os.Getenv("GOMAXPROCS") != "", runtime.GOMAXPROCS(0)))
	var rev int64  // etcd's revision of cfg; 0: the file's
	var sum string // fleetTarget.Apply's checksum of etcd's cfg
	if fl != nil {
		var err error
		if cfg, rev, err = fleetConfig(fl, cfg, o.fleet.wait, log); err != nil {
			log.Error("no configuration to start with", "fleet", fl.Prefix, "err", err)
			return 1
		}
		if rev != 0 {
			sum = proxy.Checksum(cfg)
		}
		rehost(cfg, fl.ListenHost)
		o.inFleet = true
	}
	// A route file's cron may ask for a reload (mcp.schedule_config_reload):
	// one pending ask is enough, as memcached keeps one flag.
	asked := make(chan struct{}, 1)
	schedule := func() {
		select {
		case asked <- struct{}{}:
		default:
		}
	}
	// A pool's servers changed in DNS: one pending ask, as above.
	dnsChanged := make(chan struct{}, 1)
	h := newHandover(log)
	srv, op, ok := start(o, cfg, log, h, schedule, dnsChanged)
	if !ok {
		return 1
	}
	defer op.close()
	leave := func() {}
	if fl != nil {
		var err error
		if leave, err = joinFleet(fl, op, rev, sum, log); err != nil {
			log.Error("cannot join the fleet", "fleet", fl.Prefix, "err", err)
			srv.Shutdown(context.Background())
			return 1
		}
	}
	// Signals are caught from here on: a SIGHUP sent as soon as the pid
	// file or the "started" line appears reloads, it does not kill.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR2)
	waitReady(srv)
	removePidFile := writePidFile(o.pidFile, log)
	defer removePidFile()
	h.signalReady(srv)
	if err := notifyReady(); err != nil {
		log.Warn("cannot tell systemd the proxy is ready", "err", err)
	}
	log.Info("shardproxy started", "version", proxy.Version, "conf", o.conf, "pid", os.Getpid(),
		"threads", runtime.GOMAXPROCS(0))

	sig := waitSignal(sigs, asked, dnsChanged, op, h)
	if sig == nil {
		log.Info("shutting down", "trigger", "http", "timeout", o.drain)
	} else {
		log.Info("shutting down", "signal", sig.String(), "timeout", o.drain)
	}
	leave() // the fleet forgets this proxy before it drains
	h.handOff(srv)
	drainServer(srv, o.drain, sigs, log)
	h.close()
	log.Info("shardproxy stopped")
	return 0
}

// drainServer drains srv for at most timeout (Shutdown: Drain, then the
// backends close); a second SIGTERM or SIGINT ends the wait, SIGHUP and
// SIGUSR2 do not.
func drainServer(srv *proxy.Server, timeout time.Duration, sigs <-chan os.Signal, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	go func() {
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGTERM || sig == syscall.SIGINT {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown cut short", "err", err)
	}
}

// waitSignal returns what stops the proxy: SIGTERM, SIGINT, a SIGUSR2
// whose upgrade succeeded, or nil when POST /drain asked to drain.
// Meanwhile it reloads on SIGHUP and for every reload a route file asks
// for, and applies the configuration again for every change of a
// servers_from pool's servers.
func waitSignal(sigs <-chan os.Signal, asked, dnsChanged <-chan struct{}, op *operator, h *handover) os.Signal {
	for {
		select {
		case sig := <-sigs:
			switch {
			case sig == syscall.SIGHUP:
				op.reload("sighup")
			case sig != syscall.SIGUSR2 || h.upgrade():
				return sig
			}
		case <-op.drainAsked:
			return nil
		case <-asked:
			op.reload("lua")
		case <-dnsChanged:
			op.redns()
		}
	}
}

// start builds and starts the proxy and its admin listeners. When it
// cannot, it logs why, stops what it started and returns false.
// schedule is what a pool calls to ask for a reload; dnsChanged hears of
// a servers_from pool's new servers. A servers_from pool waits for its
// first answer (dnspool.DefaultStartWait at most); without one it starts
// on its servers key's set, and without that the proxy does not start.
func start(o *options, cfg *config.Config, log *slog.Logger, h *handover, schedule func(), dnsChanged chan<- struct{}) (*proxy.Server, *operator, bool) {
	dns := newDNS(log, dnsChanged)
	run, err := dns.Resolve(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		dns.Close()
		return nil, nil, false
	}
	srv, err := proxy.New(run, proxy.Options{Logger: log, ScheduleReload: schedule, FleetRing: o.inFleet,
		Listen: h.Listen})
	if err != nil {
		log.Error("cannot build proxy", "err", err)
		dns.Close()
		return nil, nil, false
	}
	if err := srv.Start(); err != nil {
		log.Error("cannot start", "err", err)
		srv.Shutdown(context.Background())
		dns.Close()
		return nil, nil, false
	}
	op := newOperator(o, srv, log, dns, cfg, h.Listen)
	if err := op.trace(cfg.Admin.Traces); err != nil {
		log.Error("cannot trace", "err", err)
	}
	if errs := op.listen(cfg.Admin); len(errs) > 0 {
		for _, err := range errs {
			log.Error("cannot start admin", "err", err)
		}
		op.close()
		srv.Shutdown(context.Background())
		return nil, nil, false
	}
	return srv, op, true
}

// writePidFile writes the process id to path (-p), if any; remove removes
// the file it wrote, unless a new process has written its own there since
// (an upgrade). A pid file that cannot be written is logged, not fatal.
func writePidFile(path string, log *slog.Logger) (remove func()) {
	if path == "" {
		return func() {}
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		log.Error("cannot write pid file", "file", path, "err", err)
		return func() {}
	}
	return func() {
		if ownsPidFile(path) {
			os.Remove(path)
		}
	}
}
