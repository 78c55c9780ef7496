package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"shardproxy/internal/proc"
)

// Server settings of the harness's backends.
const (
	// memcachedMB is -m for the main memcached backends: big enough that
	// nothing a load writes is evicted (an eviction would be a miss, and
	// after the prefill a miss is a wrong reply).
	memcachedMB = 1024
	// maxClients is memcached's -c and redis-server's maxclients: above
	// the 10,000 connections of the scaling runs (memcached's default is
	// 1,024).
	maxClients = 12000
	// proxyTimeout is the pools' timeout (ms): generous, so that a slow
	// 256 KB round trip under load is not turned into an error.
	proxyTimeout = 5000
)

// fleet starts and owns every server process of a run: the backends, the
// proxies under test, and their config and log files in a work directory.
type fleet struct {
	work string
	bins binaries

	mc, rd []*proc.Process // the main backends: memcached and redis-server

	mu     sync.Mutex
	others []*proc.Process   // proxies and extra backends, stopped by close
	seq    int               // numbers config and log files
	routes map[string]string // v2RouteFile's files by backend address
}

// binaries are the paths of the programs a run executes.
type binaries struct {
	memcached, redisServer, nutcracker, shardproxy, shardbench, redisBenchmark string
	// memcachedProxy is a memcached built with its proxy (-memcached-proxy);
	// "" leaves the memcached-proxy rows out.
	memcachedProxy string
	// memtier is memtier_benchmark (-memtier); "" runs every load under
	// shardbench only.
	memtier string
	// baseline is another shardproxy binary (-baseline), run beside
	// shardproxy as shardproxy-baseline; "" leaves that row out.
	baseline string
}

// newFleet starts n memcached and n redis-server backends.
func newFleet(work string, bins binaries, n int) (*fleet, error) {
	f := &fleet{work: work, bins: bins, routes: map[string]string{}}
	for range n {
		mc, err := f.startMemcached(4, memcachedMB)
		if err != nil {
			f.close()
			return nil, err
		}
		f.mc = append(f.mc, mc)
		rd, err := f.startRedis()
		if err != nil {
			f.close()
			return nil, err
		}
		f.rd = append(f.rd, rd)
	}
	return f, nil
}

// file returns a fresh path in the work directory.
func (f *fleet) file(name string) string {
	f.mu.Lock()
	f.seq++
	n := f.seq
	f.mu.Unlock()
	return filepath.Join(f.work, fmt.Sprintf("%03d-%s", n, name))
}

// track registers p to be stopped by close.
func (f *fleet) track(p *proc.Process) *proc.Process {
	f.mu.Lock()
	f.others = append(f.others, p)
	f.mu.Unlock()
	return p
}

// startMemcached starts memcached with threads worker threads and mb MiB of
// memory on a free port. Callers other than newFleet must stop it.
func (f *fleet) startMemcached(threads, mb int) (*proc.Process, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0", "-t", strconv.Itoa(threads),
		"-m", strconv.Itoa(mb), "-c", strconv.Itoa(maxClients)}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // memcached refuses root otherwise
	}
	addr := loopback(port)
	return startProc("memcached", addr, f.bins.memcached, args, f.file("memcached.log"), proc.MemcachedReady)
}

// startRedis starts redis-server without persistence on a free port.
func (f *fleet) startRedis() (*proc.Process, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	dir := f.file("redis")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--maxclients", strconv.Itoa(maxClients)}
	addr := loopback(port)
	return startProc("redis-server", addr, f.bins.redisServer, args, f.file("redis.log"), proc.RedisReady)
}

// spOptions are what shardproxy runs with beyond the YAML both proxies
// share.
type spOptions struct {
	// serverProtocol, when set, is its memcache pool's server_protocol.
	serverProtocol string
	// threads is its -threads flag; 0 is Go's default (every core).
	threads int
}

// benchSP is what shardproxy runs with unless a load says otherwise: the
// memcache pools with benchServerProtocol, and benchThreads threads.
var benchSP = spOptions{serverProtocol: benchServerProtocol, threads: benchThreads}

// startProxy starts kind with one pool over servers: shardproxy and
// nutcracker from the same twemproxy YAML, shardproxy-v2 (shardproxy with a
// Lua pool) and memcached-proxy from the same route file (v2Route over the
// first server). shardproxy runs with sp, memcached's proxy with sp.threads
// worker threads.
func (f *fleet) startProxy(kind string, redis bool, servers []*proc.Process, sp spOptions) (*proc.Process, error) {
	port, err := proc.FreePort()
	if err != nil {
		return nil, err
	}
	addr := loopback(port)
	var path string
	var args []string
	switch kind {
	case shardproxy, nutcracker, shardproxyV2, shardproxyV2Meta, shardproxyText, shardproxyNear, shardproxyDefaults,
		shardproxyBaseline:
		statsPort, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		conf, err := f.proxyConfig(kind, addr, redis, servers, sp)
		if err != nil {
			return nil, err
		}
		args = []string{"-c", conf, "-s", strconv.Itoa(statsPort), "-a", "127.0.0.1"}
		path = f.bins.nutcracker
		if kind != nutcracker {
			// Its HTTP admin too on a free port: the default one may be taken.
			adminPort, err := proc.FreePort()
			if err != nil {
				return nil, err
			}
			path = f.bins.shardproxy
			if kind == shardproxyBaseline {
				path = f.bins.baseline
			}
			args = append(args, "-admin", loopback(adminPort))
			if kind != shardproxyDefaults {
				args = append(args, "-threads", strconv.Itoa(sp.threads))
			}
		}
	case mcProxy:
		if f.bins.memcachedProxy == "" {
			return nil, fmt.Errorf("no memcached with its proxy given (-memcached-proxy)")
		}
		route, err := f.v2RouteFile(servers[0])
		if err != nil {
			return nil, err
		}
		path, args = f.bins.memcachedProxy, []string{"-p", strconv.Itoa(port), "-l", "127.0.0.1", "-U", "0",
			"-t", strconv.Itoa(max(sp.threads, 1)), "-c", strconv.Itoa(maxClients), "-o", "proxy_config=" + route}
		if os.Geteuid() == 0 {
			args = append(args, "-u", "root")
		}
	default:
		return nil, fmt.Errorf("unknown proxy %q", kind)
	}
	p, err := startProc(kind, addr, path, args, f.file(kind+".log"), proc.AcceptsTCP)
	if err != nil {
		return nil, err
	}
	return f.track(p), nil
}

// proxyConfig writes the YAML kind runs with and returns its path.
func (f *fleet) proxyConfig(kind, addr string, redis bool, servers []*proc.Process, sp spOptions) (string, error) {
	var yaml string
	switch kind {
	case shardproxyV2, shardproxyV2Meta:
		route, err := f.v2RouteFile(servers[0])
		if err != nil {
			return "", err
		}
		yaml = fmt.Sprintf("bench:\n  listen: %s\n  timeout: %d\n  lua: %s\n", addr, proxyTimeout, route)
		if kind == shardproxyV2Meta {
			yaml += "  server_protocol: meta\n"
		}
	case shardproxyText:
		yaml = poolYAML(addr, redis, servers) + "  server_protocol: text\n"
	default:
		yaml = poolYAML(addr, redis, servers)
		if (kind == shardproxy || kind == shardproxyBaseline || kind == shardproxyNear) && !redis && sp.serverProtocol != "" {
			yaml += "  server_protocol: " + sp.serverProtocol + "\n"
		}
		if kind == shardproxyNear {
			yaml += fmt.Sprintf("  near_cache: %d\n", nearCacheMiB)
		}
	}
	conf := f.file(kind + ".yml")
	return conf, os.WriteFile(conf, []byte(yaml), 0o644)
}

// v2Route is the route file of the V2 loads, the same for shardproxy and
// memcached's proxy: one function generator whose handler sends every key
// command with enqueue_and_wait to one pool of one memcached (%s and %s
// are its host and port), as examples/lua/v2_basic.lua does, with the
// pools' timeout of the other loads.
const v2Route = `-- bench: a V2 route, one function generator, enqueue_and_wait to one pool.
function mcp_config_pools()
    mcp.backend_read_timeout(%g)
    local b = mcp.backend("b1", "%s", %s)
    return { main = mcp.pool({ b }) }
end

local function direct_gen(rctx, handle)
    return function(r)
        return rctx:enqueue_and_wait(r, handle)
    end
end

function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local handle = fgen:new_handle(pools.main)
    fgen:ready({ n = "direct", f = direct_gen, a = handle })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
`

// v2RouteFile writes v2Route for server once and returns its path.
func (f *fleet) v2RouteFile(server *proc.Process) (string, error) {
	f.mu.Lock()
	path, ok := f.routes[server.Addr()]
	f.mu.Unlock()
	if ok {
		return path, nil
	}
	host, port, err := net.SplitHostPort(server.Addr())
	if err != nil {
		return "", err
	}
	path = f.file("v2-route.lua")
	text := fmt.Sprintf(v2Route, float64(proxyTimeout)/1000, host, port)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return "", err
	}
	f.mu.Lock()
	f.routes[server.Addr()] = path
	f.mu.Unlock()
	return path, nil
}

// poolYAML is the twemproxy configuration both proxies run: one pool, ketama
// over fnv1a_64 as twemproxy's docs recommend, one connection per server,
// no ejection.
func poolYAML(listen string, redis bool, servers []*proc.Process) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bench:\n  listen: %s\n  hash: fnv1a_64\n  distribution: ketama\n", listen)
	fmt.Fprintf(&b, "  timeout: %d\n  redis: %t\n  servers:\n", proxyTimeout, redis)
	for _, s := range servers {
		fmt.Fprintf(&b, "    - %s:1\n", s.Addr())
	}
	return b.String()
}

// flush empties every main backend, so that one load's data does not
// weigh on the next.
func (f *fleet) flush() error {
	for _, p := range f.mc {
		if err := proc.Expect(p.Addr(), "flush_all\r\n", "OK"); err != nil {
			return fmt.Errorf("flush %s: %w", p, err)
		}
	}
	for _, p := range f.rd {
		if err := proc.Expect(p.Addr(), "FLUSHALL\r\n", "+OK"); err != nil {
			return fmt.Errorf("flush %s: %w", p, err)
		}
	}
	return nil
}

// backends returns the first n main backends of a protocol.
func (f *fleet) backends(redis bool, n int) []*proc.Process {
	if redis {
		return f.rd[:n]
	}
	return f.mc[:n]
}

// close stops every process the fleet started, all at once.
func (f *fleet) close() {
	f.mu.Lock()
	all := append(append(append([]*proc.Process(nil), f.others...), f.mc...), f.rd...)
	f.others = nil
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(p.Stop)
	}
	wg.Wait()
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// settle waits until f reports the same value three times in a row, 200 ms
// apart (within tolerance), or until timeout; it returns the last value.
func settle(timeout time.Duration, tolerance float64, f func() (int64, error)) (int64, error) {
	deadline := time.Now().Add(timeout)
	last, err := f()
	if err != nil {
		return 0, err
	}
	same := 0
	for same < 2 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		v, err := f()
		if err != nil {
			return 0, err
		}
		if diff := float64(v - last); diff <= tolerance*float64(last) && -diff <= tolerance*float64(last) {
			same++
		} else {
			same = 0
		}
		last = v
	}
	return last, nil
}
