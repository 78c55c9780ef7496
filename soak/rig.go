package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/proc"
)

// rig is one run's processes: three memcached and three redis-server, the
// first of each behind a fault proxy, and shardproxy in front of them with
// a memcache pool and a Redis pool.
type rig struct {
	dir     string // the run's directory: logs, the configuration
	servers *fleet
	mcs     []*proc.Process
	rds     []*proc.Process
	mcFault *faultproxy.Proxy // in front of mcs[0]
	rdFault *faultproxy.Proxy // in front of rds[0]

	mcListen, rdListen string // the proxy's pools
	admin              string // the proxy's admin address
	statsPort          int
	cfgPath            string
	proxy              *proc.Process
}

func newRig(dir string) *rig {
	return &rig{dir: dir, servers: &fleet{dir: dir}, cfgPath: dir + "/soak.yml"}
}

// close stops what start started: the fault proxies, then every server.
func (r *rig) close() {
	if r.rdFault != nil {
		r.rdFault.Close()
	}
	if r.mcFault != nil {
		r.mcFault.Close()
	}
	r.servers.stop()
}

// start starts the servers, their fault proxies and shardproxy, and
// returns once both of the proxy's pools listen.
func (r *rig) start(proxyBin string) error {
	if err := r.startBackends(); err != nil {
		return err
	}
	if err := r.pickPorts(); err != nil {
		return err
	}
	if err := r.writeConfig(500, "text"); err != nil {
		return err
	}
	proxyLog := r.dir + "/shardproxy.log"
	proxy, err := r.servers.start("shardproxy", proxyBin, []string{"-c", r.cfgPath, "--admin", r.admin,
		"-s", strconv.Itoa(r.statsPort), "-a", "127.0.0.1", "-o", proxyLog, "-v", "4"}, r.mcListen, nil)
	if err != nil {
		return err
	}
	r.proxy = proxy
	return waitListen(r.rdListen)
}

// startBackends starts three of each server and puts a fault proxy in
// front of the first of each.
func (r *rig) startBackends() error {
	for i := range 3 {
		mc, err := r.servers.memcached(fmt.Sprintf("memcached-%d", i))
		if err != nil {
			return err
		}
		r.mcs = append(r.mcs, mc)
		rd, err := r.servers.redis(fmt.Sprintf("redis-%d", i))
		if err != nil {
			return err
		}
		r.rds = append(r.rds, rd)
	}
	var err error
	if r.mcFault, err = faultproxy.Listen(r.mcs[0].Addr()); err != nil {
		return err
	}
	r.rdFault, err = faultproxy.Listen(r.rds[0].Addr())
	return err
}

// pickPorts picks the proxy's free ports: its two pools, admin and stats.
func (r *rig) pickPorts() error {
	var ports [4]int
	for i := range ports {
		var err error
		if ports[i], err = proc.FreePort(); err != nil {
			return err
		}
	}
	r.mcListen = fmt.Sprintf("127.0.0.1:%d", ports[0])
	r.rdListen = fmt.Sprintf("127.0.0.1:%d", ports[1])
	r.admin = fmt.Sprintf("127.0.0.1:%d", ports[2])
	r.statsPort = ports[3]
	return nil
}

// configFormat is the proxy's configuration: the memcache pool's listen
// address, timeout, server_protocol and servers, then the Redis pool's
// listen address, timeout and servers.
const configFormat = `mc:
  listen: %s
  hash: fnv1a_64
  distribution: ketama
  timeout: %d
  server_protocol: %s
  server_failure_limit: 3
  server_retry_timeout: 1000
  auto_eject_hosts: false
  servers:
    - %s:1 mc0
    - %s:1 mc1
    - %s:1 mc2
rd:
  listen: %s
  redis: true
  hash: fnv1a_64
  distribution: ketama
  timeout: %d
  server_failure_limit: 3
  server_retry_timeout: 1000
  auto_eject_hosts: false
  servers:
    - %s:1 rd0
    - %s:1 rd1
    - %s:1 rd2
`

// writeConfig replaces the proxy's configuration file at once (a reload
// never reads half of it) with the pools' timeout and the memcache pool's
// server_protocol.
func (r *rig) writeConfig(timeout int, serverProtocol string) error {
	cfg := fmt.Sprintf(configFormat, r.mcListen, timeout, serverProtocol, r.mcFault.Addr(), r.mcs[1].Addr(), r.mcs[2].Addr(),
		r.rdListen, timeout, r.rdFault.Addr(), r.rds[1].Addr(), r.rds[2].Addr())
	tmp := r.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(cfg), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.cfgPath)
}

// measure samples the proxy's RSS and goroutines and prints them.
func (r *rig) measure(label string) sample {
	s := sample{label: label, rssKB: rssKB(r.proxy.Pid()), goroutines: goroutines(r.admin)}
	fmt.Printf("soak: %-6s rss %d kB, goroutines %d\n", label, s.rssKB, s.goroutines)
	return s
}

// startClients starts nclients load goroutines per pool, which run until
// stop closes, and returns their tallies.
func (r *rig) startClients(nclients int, stop <-chan struct{}, wg *sync.WaitGroup) []*tally {
	var tallies []*tally
	for i := range 2 * nclients {
		redis := i%2 == 1
		c := &client{redis: redis, addr: r.mcListen, prefix: fmt.Sprintf("mc:c%d", i), keys: keyTable{}, t: newTally()}
		if redis {
			c.addr, c.prefix = r.rdListen, fmt.Sprintf("rd:c%d", i)
		}
		tallies = append(tallies, c.t)
		wg.Add(1)
		go func() { defer wg.Done(); c.run(stop) }()
	}
	return tallies
}

// watch waits out the run's duration or an interrupt, printing the
// clients' progress every 30 s and sampling the proxy halfway. It returns
// the samples with the middle one, and whether the run was interrupted.
func (r *rig) watch(duration time.Duration, interrupted <-chan struct{}, tallies []*tally, samples []sample) ([]sample, bool) {
	start := time.Now()
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	middle := time.After(duration / 2)
	end := time.After(duration)
	wasInterrupted := false
loop:
	for {
		select {
		case <-middle:
			samples = append(samples, r.measure("middle"))
		case <-end:
			break loop
		case <-interrupted:
			wasInterrupted = true
			break loop
		case <-progress.C:
			total := sum(tallies)
			fmt.Printf("soak: %s requests %d, wrong %d, lost %d\n", time.Since(start).Round(time.Second), total.requests, total.wrong, total.lost)
		}
	}
	if len(samples) == 1 {
		samples = append(samples, r.measure("middle"))
	}
	return samples, wasInterrupted
}

// sum is the clients' tallies added up.
func sum(tallies []*tally) *tally {
	total := newTally()
	for _, t := range tallies {
		total.add(t)
	}
	return total
}
