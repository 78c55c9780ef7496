package testserver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/proc"
)

// sentinelTimeout bounds how long a new fleet may take until every
// Sentinel knows every replica and every other Sentinel.
const sentinelTimeout = 30 * time.Second

// FleetConfig describes a SentinelFleet. A zero FleetConfig is one shard
// with one replica and three Sentinels.
type FleetConfig struct {
	// Shards is the number of masters, named "shard0", "shard1", ...;
	// default 1.
	Shards int
	// Replicas is the number of replicas of each master; 0 means 1.
	Replicas int
	// Sentinels is the number of Sentinels; default 3. The quorum is a
	// majority of them.
	Sentinels int
	// DownAfter is each Sentinel's down-after-milliseconds; default 1s.
	DownAfter time.Duration
	// FailoverTimeout is each Sentinel's failover-timeout; default 3s.
	FailoverTimeout time.Duration
	// Password, if set, is every server's requirepass and masterauth
	// (and the Sentinels' auth-pass for the masters).
	Password string
	// SentinelPassword, if set, is every Sentinel's requirepass (and
	// sentinel-pass, with which they reach one another).
	SentinelPassword string
}

// SentinelFleet is redis-server shards, each a master with replicas
// (replicaof), watched by redis-sentinel processes on loopback ports.
type SentinelFleet struct {
	// Names are the master names the Sentinels monitor, by shard.
	Names []string
	// Servers[i] are shard i's servers, the first master at the start;
	// Sentinel may promote another (see Master).
	Servers [][]*Server
	// Sentinels are the Sentinels.
	Sentinels []*Server

	cfg FleetConfig
}

// StartSentinelFleet starts the servers, then the Sentinels, and returns
// once every Sentinel reports, for every master, all its replicas and all
// the other Sentinels, so that a failover can start at once. Everything is
// stopped when the test ends.
func StartSentinelFleet(t testing.TB, cfg FleetConfig) *SentinelFleet {
	t.Helper()
	cfg.Shards = max(cfg.Shards, 1)
	cfg.Replicas = max(cfg.Replicas, 1)
	if cfg.Sentinels <= 0 {
		cfg.Sentinels = 3
	}
	if cfg.DownAfter <= 0 {
		cfg.DownAfter = time.Second
	}
	if cfg.FailoverTimeout <= 0 {
		cfg.FailoverTimeout = 3 * time.Second
	}
	f := &SentinelFleet{cfg: cfg}
	var auth []string
	if cfg.Password != "" {
		auth = []string{"--requirepass", cfg.Password, "--masterauth", cfg.Password}
	}
	for i := range cfg.Shards {
		f.Names = append(f.Names, "shard"+strconv.Itoa(i))
		m := StartRedis(t, auth...)
		shard := []*Server{m}
		for range cfg.Replicas {
			shard = append(shard, StartRedis(t, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(m.Port)}, auth...)...))
		}
		f.Servers = append(f.Servers, shard)
	}
	for range cfg.Sentinels {
		f.Sentinels = append(f.Sentinels, f.startSentinel(t))
	}
	if err := f.waitReady(); err != nil {
		t.Fatalf("testserver: sentinel fleet not ready: %v", err)
	}
	return f
}

// startSentinel writes a sentinel.conf (Sentinel rewrites it, so it lives
// in its own directory, kept across Restart) and starts redis-sentinel.
func (f *SentinelFleet) startSentinel(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	return start(t, spec{
		name: "redis-sentinel",
		prepare: func(port int) ([]string, string) {
			path := filepath.Join(dir, "sentinel.conf")
			if err := os.WriteFile(path, []byte(f.sentinelConf(port, dir)), 0o600); err != nil {
				t.Fatalf("testserver: %v", err)
			}
			return []string{path}, loopback(port)
		},
		ready: proc.RedisReady,
	})
}

func (f *SentinelFleet) sentinelConf(port int, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "port %d\nbind 127.0.0.1\ndaemonize no\ndir %s\n", port, dir)
	if p := f.cfg.SentinelPassword; p != "" {
		fmt.Fprintf(&b, "requirepass %s\nsentinel sentinel-pass %s\n", p, p)
	}
	quorum := f.cfg.Sentinels/2 + 1
	for i, name := range f.Names {
		fmt.Fprintf(&b, "sentinel monitor %s 127.0.0.1 %d %d\n", name, f.Servers[i][0].Port, quorum)
		fmt.Fprintf(&b, "sentinel down-after-milliseconds %s %d\n", name, f.cfg.DownAfter.Milliseconds())
		fmt.Fprintf(&b, "sentinel failover-timeout %s %d\n", name, f.cfg.FailoverTimeout.Milliseconds())
		fmt.Fprintf(&b, "sentinel parallel-syncs %s 1\n", name)
		if f.cfg.Password != "" {
			fmt.Fprintf(&b, "sentinel auth-pass %s %s\n", name, f.cfg.Password)
		}
	}
	return b.String()
}

// waitReady polls every Sentinel until it knows every replica of every
// master (online) and every other Sentinel.
func (f *SentinelFleet) waitReady() error {
	deadline := time.Now().Add(sentinelTimeout)
	for _, s := range f.Sentinels {
		for _, name := range f.Names {
			for {
				err := f.sentinelKnows(s, name)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("%s, master %s: %w", s.Addr, name, err)
				}
				time.Sleep(pollInterval)
			}
		}
	}
	return nil
}

func (f *SentinelFleet) sentinelKnows(s *Server, name string) error {
	fields, err := RedisCommand(s.Addr, f.cfg.SentinelPassword, "SENTINEL", "MASTER", name)
	if err != nil {
		return err
	}
	info := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		info[fields[i]] = fields[i+1]
	}
	want := map[string]string{
		"num-slaves":          strconv.Itoa(f.cfg.Replicas),
		"num-other-sentinels": strconv.Itoa(f.cfg.Sentinels - 1),
		"flags":               "master",
	}
	for k, v := range want {
		if info[k] != v {
			return fmt.Errorf("%s is %q, want %q", k, info[k], v)
		}
	}
	replicas, err := RedisCommand(s.Addr, f.cfg.SentinelPassword, "SENTINEL", "REPLICAS", name)
	if err != nil {
		return err
	}
	for i := 0; i+1 < len(replicas); i += 2 {
		if replicas[i] == "flags" && replicas[i+1] != "slave" {
			return fmt.Errorf("a replica's flags are %q", replicas[i+1])
		}
		if replicas[i] == "master-link-status" && replicas[i+1] != "ok" {
			return fmt.Errorf("a replica's master link is %q", replicas[i+1])
		}
	}
	return nil
}

// SentinelAddrs returns the Sentinels' addresses.
func (f *SentinelFleet) SentinelAddrs() []string {
	var out []string
	for _, s := range f.Sentinels {
		out = append(out, s.Addr)
	}
	return out
}

// Master returns the running server of shard i whose ROLE is master, or
// nil when none is.
func (f *SentinelFleet) Master(i int) *Server {
	for _, s := range f.Servers[i] {
		if s.Pid() == 0 {
			continue
		}
		if fields, err := RedisCommand(s.Addr, f.cfg.Password, "ROLE"); err == nil && len(fields) > 0 && fields[0] == "master" {
			return s
		}
	}
	return nil
}

// RedisCommand sends one command to addr, after AUTH password when
// password is set, and returns the reply as strings: a simple, integer or
// bulk string as one, an array flattened (nested arrays too; a null as
// ""). An error reply becomes an error. Enough RESP to drive Sentinels.
func RedisCommand(addr, password string, args ...string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * probeTimeout))
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := command(conn, r, "AUTH", password); err != nil {
			return nil, err
		}
	}
	return command(conn, r, args...)
}

func command(w io.Writer, r *bufio.Reader, args ...string) ([]string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return nil, err
	}
	return readFlat(r, nil, 0)
}

// readFlat appends one reply to out, arrays flattened.
func readFlat(r *bufio.Reader, out []string, depth int) ([]string, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deep")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return append(out, line[1:]), nil
	case '-':
		return nil, fmt.Errorf("redis: %s", line[1:])
	case '$', '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("bad header %q", line)
		}
		if n < 0 {
			return append(out, ""), nil
		}
		if line[0] == '*' {
			for range n {
				if out, err = readFlat(r, out, depth+1); err != nil {
					return nil, err
				}
			}
			return out, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return append(out, string(buf[:n])), nil
	}
	return nil, fmt.Errorf("unsupported reply %q", line)
}
