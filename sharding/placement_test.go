package sharding

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Placement vectors: TestPlacementMatchesNutcracker asks the real nutcracker
// where it puts keys and compares with Pool; with -update it records what it
// saw in testdata/placement, which TestPlacementGolden replays without
// nutcracker.

const (
	placementDir  = "testdata/placement"
	placementKeyN = 5000
)

// placementKeys returns the deterministic key set of the placement tests:
// printable ASCII, bytes 0x80-0xff, "{tag}" keys, the empty tag "{}", "$tag$"
// and "$$", unmatched tag characters and typical application keys. Keys are
// valid memcached text keys: no space or control bytes, at most 64 bytes.
func placementKeys() [][]byte {
	gen := lcg(2024)
	printable := func(n int, avoid string) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			c := byte(0x21 + gen.intn(0x5e))
			if !strings.ContainsRune(avoid, rune(c)) {
				b = append(b, c)
			}
		}
		return b
	}
	binary := func(n int, avoid string) []byte {
		b := make([]byte, n)
		for i := range b {
			if gen.intn(10) < 7 {
				b[i] = byte(0x80 + gen.intn(0x80))
			} else {
				b[i] = printable(1, avoid)[0]
			}
		}
		return b
	}
	tags := make([][]byte, 400)
	for i := range tags {
		if i%3 == 0 {
			tags[i] = binary(1+gen.intn(12), "{}$")
		} else {
			tags[i] = printable(1+gen.intn(12), "{}$")
		}
	}
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	seen := map[string]bool{}
	var keys [][]byte
	for i := 0; len(keys) < placementKeyN; i++ {
		var k []byte
		tag := tags[gen.intn(len(tags))]
		pre, suf := printable(gen.intn(8), "{}$"), binary(gen.intn(10), "{}$")
		switch i % 20 {
		case 0, 1, 2, 3, 4, 5:
			k = printable(1+gen.intn(40), "")
		case 6, 7, 8, 9:
			k = binary(1+gen.intn(40), "")
		case 10, 11, 12, 13:
			k = join(pre, []byte("{"), tag, []byte("}"), suf)
		case 14:
			k = join(pre, []byte("{}"), suf, tag)
		case 15:
			k = join(pre, []byte("$"), tag, []byte("$"), suf)
		case 16:
			k = join(pre, []byte("$$"), tag, suf)
		case 17:
			switch gen.intn(4) {
			case 0:
				k = join(pre, []byte("{"), tag)
			case 1:
				k = join(pre, []byte("}"), tag, []byte("{"))
			case 2:
				k = join([]byte("}{"), tag, []byte("}"))
			default:
				k = join(pre, []byte("$"), tag)
			}
		case 18:
			k = []byte(fmt.Sprintf("user:%d", gen.intn(10000000)))
		case 19:
			k = []byte(fmt.Sprintf("obj:{%d}:field%d", gen.intn(1000), gen.intn(100)))
		}
		if len(k) == 0 || len(k) > 64 || seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		keys = append(keys, k)
	}
	return keys
}

// fleet is a set of memcached servers that placement cases share; cases on
// one fleet run one after another, each storing its own value.
type fleet struct {
	tcp    []memcachedServer // 127.0.0.1, free ports (fleetTCP of them)
	p11211 []memcachedServer // 127.0.0.x:11211
	unix   []memcachedServer
}

// fleetTCP is the number of TCP memcached servers per fleet.
const fleetTCP = 25

// caseServer is one servers line of a case.
type caseServer struct {
	mc     memcachedServer
	weight int
	name   string // explicit node name, or ""
}

// line is the servers line nutcracker reads.
func (s caseServer) line() string {
	l := s.mc.addr
	if s.mc.network == "unix" {
		l = s.mc.addr
	}
	l += ":" + strconv.Itoa(s.weight)
	if s.name != "" {
		l += " " + s.name
	}
	return l
}

// node is the Server the pool sees: twemproxy's node name and the weight.
func (s caseServer) node() Server {
	if s.name != "" {
		return Server{Name: s.name, Weight: s.weight}
	}
	return Server{Name: s.mc.twemproxyName(), Weight: s.weight}
}

// placementVariants are the server layouts every hash x distribution runs.
var placementVariants = []struct {
	name    string
	hashTag string
	servers func(f *fleet) []caseServer
}{
	{"equal", "", func(f *fleet) []caseServer {
		var s []caseServer
		for _, mc := range f.tcp[:10] {
			s = append(s, caseServer{mc: mc, weight: 1})
		}
		return s
	}},
	{"weighted", "", func(f *fleet) []caseServer {
		var s []caseServer
		for i, w := range []int{1, 2, 3, 5, 8, 13, 21} {
			s = append(s, caseServer{mc: f.tcp[i], weight: w})
		}
		return s
	}},
	// 25 equal weights: float32 gives each server 39 point groups (156
	// points), not 40; peers.md's "equal weights -> exactly 160" is wrong
	// for n = 25, 47, 50, 55, ...
	{"equal25", "", func(f *fleet) []caseServer {
		var s []caseServer
		for _, mc := range f.tcp[:25] {
			s = append(s, caseServer{mc: mc, weight: 1})
		}
		return s
	}},
	// Names whose length-first order differs from lexicographic order.
	{"named", "{}", func(f *fleet) []caseServer {
		names := []string{"server10", "server9", "alpha", "b", "Zed", "node-with-a-longer-name"}
		weights := []int{1, 1, 2, 1, 3, 1}
		var s []caseServer
		for i, n := range names {
			s = append(s, caseServer{mc: f.tcp[i], weight: weights[i], name: n})
		}
		return s
	}},
	// Port 11211 servers are named by host alone, the others host:port.
	{"port11211", "{}", func(f *fleet) []caseServer {
		var s []caseServer
		for i, mc := range f.p11211 {
			s = append(s, caseServer{mc: mc, weight: 1 + i%2})
		}
		for _, mc := range f.tcp[:3] {
			s = append(s, caseServer{mc: mc, weight: 1})
		}
		return s
	}},
	// Unix sockets are named "path:". Weights 1, 1, 1, 10, 12 hit a float32
	// edge of ketama: 1/25*160/4*5 is 7.9999995 in float32, so the unix
	// servers get 28 points each, not 32.
	{"unix", "$$", func(f *fleet) []caseServer {
		var s []caseServer
		for _, mc := range f.unix {
			s = append(s, caseServer{mc: mc, weight: 1})
		}
		s = append(s, caseServer{mc: f.tcp[3], weight: 10}, caseServer{mc: f.tcp[4], weight: 12})
		return s
	}},
}

// placementCase is one nutcracker pool to compare with.
type placementCase struct {
	name    string
	variant int // index into placementVariants
	hash    string
	dist    string
	hashTag string
	servers []caseServer
	listen  string
	value   string
	// autoEject turns on auto_eject_hosts with server_failure_limit 1 and a
	// retry timeout longer than the test.
	autoEject bool
}

func (c *placementCase) config() Config {
	cfg := Config{Hash: c.hash, Distribution: c.dist, HashTag: c.hashTag, AutoEject: c.autoEject}
	for _, s := range c.servers {
		cfg.Servers = append(cfg.Servers, s.node())
	}
	return cfg
}

func (c *placementCase) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n  listen: %s\n  hash: %s\n  distribution: %s\n", c.name, c.listen, c.hash, c.dist)
	if c.hashTag != "" {
		fmt.Fprintf(&b, "  hash_tag: %q\n", c.hashTag)
	}
	b.WriteString("  timeout: 5000\n")
	if c.autoEject {
		b.WriteString("  auto_eject_hosts: true\n  server_failure_limit: 1\n  server_retry_timeout: 600000\n")
	} else {
		b.WriteString("  auto_eject_hosts: false\n")
	}
	b.WriteString("  servers:\n")
	for _, s := range c.servers {
		fmt.Fprintf(&b, "   - %s\n", s.line())
	}
	return b.String()
}

// TestPlacementMatchesNutcracker stores keys through the real nutcracker for
// every twemproxy hash x {ketama, modula} x server layout, finds which
// memcached holds each key, and requires Pool to pick the same server for
// every key.
func TestPlacementMatchesNutcracker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nutcracker and memcached; skipped with -short")
	}
	nc := requireBinary(t, "nutcracker", "apt-get install nutcracker (twemproxy 0.5.0)")
	requireBinary(t, "memcached", "apt-get install memcached")
	if out, err := exec.Command(nc, "-V").CombinedOutput(); err == nil {
		t.Logf("%s", bytes.TrimSpace(out))
	}

	keys := placementKeys()
	if *update {
		writePlacementKeys(t, keys)
	}
	var cases []*placementCase
	for _, hash := range twemproxyHashes {
		for _, dist := range []string{"ketama", "modula"} {
			for vi, v := range placementVariants {
				cases = append(cases, &placementCase{
					name: hash + "-" + dist + "-" + v.name, variant: vi, hash: hash, dist: dist, hashTag: v.hashTag,
					value: "v" + strconv.Itoa(len(cases)),
				})
			}
		}
	}
	ks := newKeySet(keys)
	const fleets = 2
	// Every TCP port of every fleet is chosen at once, so none repeats.
	perFleet := fleetTCP + 1 + len(cases)/fleets + 1
	ports := freePorts(t, fleets*perFleet)
	for f := range fleets {
		fleetPorts := ports[f*perFleet : (f+1)*perFleet]
		t.Run(fmt.Sprintf("fleet%d", f), func(t *testing.T) {
			t.Parallel()
			var mine []*placementCase
			for i, c := range cases {
				if i%fleets == f {
					mine = append(mine, c)
				}
			}
			runFleet(t, f, mine, ks, fleetPorts)
		})
	}
}

// runFleet starts one fleet of memcached servers and one nutcracker with a
// pool per case, then runs the cases one by one. ports holds fleetTCP ports
// for memcached, one for nutcracker's stats and one per case.
func runFleet(t *testing.T, id int, cases []*placementCase, ks *keySet, ports []int) {
	start := time.Now()
	f := &fleet{}
	for _, port := range ports[:fleetTCP] {
		f.tcp = append(f.tcp, startMemcachedTCP(t, "127.0.0.1", port))
	}
	for _, host := range port11211Hosts(t, 4, 200+30*id, 230+30*id) {
		f.p11211 = append(f.p11211, startMemcachedTCP(t, host, 11211))
	}
	dir := shortTempDir(t)
	for i := range 3 {
		f.unix = append(f.unix, startMemcachedUnix(t, filepath.Join(dir, fmt.Sprintf("mc%d.sock", i))))
	}

	var conf strings.Builder
	var listens []string
	for i, c := range cases {
		c.listen = fmt.Sprintf("127.0.0.1:%d", ports[fleetTCP+1+i])
		c.servers = placementVariants[c.variant].servers(f)
		conf.WriteString(c.yaml())
		listens = append(listens, c.listen)
	}
	startNutcracker(t, conf.String(), ports[fleetTCP], listens)
	t.Logf("fleet %d: %d memcached, nutcracker with %d pools up in %v", id,
		len(f.tcp)+len(f.p11211)+len(f.unix), len(cases), time.Since(start).Round(time.Millisecond))

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runPlacementCase(t, c, ks) })
	}
}

// runPlacementCase stores keys through the case's nutcracker pool, locates
// them on the memcached servers and compares with Pool.Pick.
func runPlacementCase(t *testing.T, c *placementCase, ks *keySet) {
	keys := ks.keys
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := mcSetAll(ctx, "tcp", c.listen, keys, c.value); err != nil {
		t.Fatalf("set through nutcracker: %v", err)
	}
	pool, err := New(c.config())
	if err != nil {
		t.Fatal(err)
	}
	sorted := map[string]int{}
	for i, s := range pool.Servers() {
		sorted[s.Name] = i
	}
	actual := make([]int, len(keys))
	for i := range actual {
		actual[i] = -1
	}
	errs := make([]error, len(c.servers))
	held := make([][]int, len(c.servers))
	var wg sync.WaitGroup
	for i, s := range c.servers {
		wg.Go(func() { held[i], errs[i] = mcHolding(ctx, s.mc.network, s.mc.addr, ks, c.value) })
	}
	wg.Wait()
	for i, s := range c.servers {
		if errs[i] != nil {
			t.Fatalf("get from %s: %v", s.mc.addr, errs[i])
		}
		for _, k := range held[i] {
			if actual[k] != -1 {
				t.Fatalf("key %x on two servers", keys[k])
			}
			actual[k] = sorted[s.node().Name]
		}
	}
	bad := 0
	for i, k := range keys {
		if actual[i] == -1 {
			t.Fatalf("key %x stored by nutcracker but found on no server", k)
		}
		got, err := pool.Pick(k)
		if err != nil {
			t.Fatal(err)
		}
		if got != actual[i] {
			if bad < 5 {
				t.Errorf("key %x (%q): Pool picks %d (%s), nutcracker used %d (%s)",
					k, k, got, pool.Servers()[got].Name, actual[i], pool.Servers()[actual[i]].Name)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d keys placed differently from nutcracker", bad, len(keys))
	}
	if *update {
		writePlacementGolden(t, c, actual)
	}
}

func writePlacementKeys(t *testing.T, keys [][]byte) {
	t.Helper()
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%x\n", k)
	}
	if err := os.MkdirAll(placementDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(placementDir, "keys.txt"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writePlacementGolden records one case: its pool configuration, then the
// server index nutcracker used for each key of keys.txt, one base-36 digit
// per key, 100 per line. Indices refer to Pool.Servers (twemproxy order).
func writePlacementGolden(t *testing.T, c *placementCase, actual []int) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("# placement recorded from nutcracker 0.5.0 by TestPlacementMatchesNutcracker -update\n")
	fmt.Fprintf(&b, "hash %s\ndistribution %s\nhash_tag %q\n", c.hash, c.dist, c.hashTag)
	for _, s := range c.servers {
		n := s.node()
		fmt.Fprintf(&b, "server %q %d\n", n.Name, n.Weight)
	}
	fmt.Fprintf(&b, "placement %d\n", len(actual))
	for i, idx := range actual {
		b.WriteString(strconv.FormatInt(int64(idx), 36))
		if i%100 == 99 || i == len(actual)-1 {
			b.WriteByte('\n')
		}
	}
	if err := os.WriteFile(filepath.Join(placementDir, c.name+".txt"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPlacementGolden replays testdata/placement without nutcracker.
func TestPlacementGolden(t *testing.T) {
	keys := readPlacementKeys(t)
	files, err := filepath.Glob(filepath.Join(placementDir, "*-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < len(twemproxyHashes)*2*len(placementVariants) {
		t.Fatalf("only %d golden files in %s; run go test -run TestPlacementMatchesNutcracker -update", len(files), placementDir)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			cfg, want := readPlacementGolden(t, file)
			if len(want) != len(keys) {
				t.Fatalf("%d placements for %d keys", len(want), len(keys))
			}
			pool, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, k := range keys {
				got, err := pool.Pick(k)
				if err != nil {
					t.Fatal(err)
				}
				if got != want[i] {
					if bad < 5 {
						t.Errorf("key %x: Pool picks %d, nutcracker used %d", k, got, want[i])
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d keys differ", bad, len(keys))
			}
		})
	}
}

func readPlacementKeys(t *testing.T) [][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(placementDir, "keys.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for _, line := range strings.Fields(string(data)) {
		k, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	return keys
}

func readPlacementGolden(t *testing.T, file string) (Config, []int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cfg Config
	var want []int
	inPlacement := false
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		if inPlacement {
			for _, c := range line {
				v, err := strconv.ParseInt(string(c), 36, 32)
				if err != nil {
					t.Fatalf("bad placement digit %q", c)
				}
				want = append(want, int(v))
			}
			continue
		}
		field, rest, _ := strings.Cut(line, " ")
		switch field {
		case "hash":
			cfg.Hash = rest
		case "distribution":
			cfg.Distribution = rest
		case "hash_tag":
			if cfg.HashTag, err = strconv.Unquote(rest); err != nil {
				t.Fatalf("hash_tag %s: %v", rest, err)
			}
		case "server":
			i := strings.LastIndexByte(rest, ' ')
			name, err := strconv.Unquote(rest[:i])
			if err != nil {
				t.Fatalf("server %s: %v", rest, err)
			}
			w, err := strconv.Atoi(rest[i+1:])
			if err != nil {
				t.Fatalf("server %s: %v", rest, err)
			}
			cfg.Servers = append(cfg.Servers, Server{Name: name, Weight: w})
		case "placement":
			inPlacement = true
		default:
			t.Fatalf("unknown line %q", line)
		}
	}
	return cfg, want
}
