package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// module is the import path of the module whose packages are checked.
const module = "shardproxy"

// rule says what one part of shardproxy may import besides the standard
// library and its own subpackages.
type rule struct {
	parts    []string // other parts of shardproxy
	external []string // third-party packages; a trailing "/" allows a whole tree
	// internal packages, which are for tests, that the part's non-test
	// code may import all the same: test helpers built on one another, and
	// the tools that run real servers as the tests do.
	internal []string
}

// layers is ARCHITECTURE.md's package table: each part of shardproxy (a
// directory relative to the module root, with its subpackages) and what its
// non-test files may import. Tests may import anything, internal/testserver
// included. A new part, a new third-party dependency or a non-test import
// of an internal package is a change to this table, made on purpose. Parts
// that do not exist yet are fine.
var layers = map[string]rule{
	"codec":    {},
	"memcache": {parts: []string{"codec"}, internal: []string{"internal/mcbase64"}},
	"resp":     {parts: []string{"codec"}, external: []string{"github.com/tidwall/redcon"}},
	"sharding": {external: []string{"github.com/cespare/xxhash/v2", "github.com/spaolacci/murmur3"}},
	"backend":  {parts: []string{"codec"}},
	// store is the proxy's own memcached-compatible cache; it imports
	// only internal/mcbase64, the base64 key decoder memcache uses too.
	"store": {internal: []string{"internal/mcbase64"}},
	// route is the Router contract every way of answering a pool's
	// requests implements, and the Exchange a session hands them.
	"route": {parts: []string{"codec", "backend"}},
	// observe is the per-request record and its views (slowlog, tap,
	// latency per command, hot keys); the tap's key patterns are
	// tidwall/match's, the hot keys' sketches BoomFilters'.
	"observe": {parts: []string{"codec", "backend", "route"}, external: []string{"github.com/tidwall/match",
		"github.com/tylertreat/BoomFilters"}},
	// tracing makes OpenTelemetry spans of the records and exports them.
	"tracing": {parts: []string{"observe"}, external: []string{"go.opentelemetry.io/"}},
	// config reads a configuration into the model every kind reads.
	"config": {parts: []string{"sharding", "codec"}, external: []string{"gopkg.in/yaml.v3"}},
	// kind is the contract between the proxy and its pool kinds: it
	// knows a pool's configuration and the router contract, no kind.
	"kind": {parts: []string{"codec", "backend", "route", "config"}},
	// The pool kinds register with kind and build from its Env (config,
	// kind). cluster and lua: route for its one completion contract;
	// sharding: CRC16 for slots; store: the cache mcp.internal reaches;
	// memcache: a Lua memcache pool's meta gets.
	"cluster": {parts: []string{"codec", "resp", "backend", "sharding", "route", "config", "kind"}},
	"lua": {parts: []string{"codec", "sharding", "backend", "cluster", "route", "store", "memcache", "config", "kind"},
		external: []string{"github.com/yuin/gopher-lua"}},
	// shard, the sharded kind: sharding's distributions, sentinel's
	// masters, cluster's read_from and read-only command table for
	// replica reads, store and memcache for the near cache, spool for
	// its deletes that could not reach their server.
	"shard": {parts: []string{"codec", "memcache", "backend", "route", "sharding", "sentinel", "cluster",
		"store", "spool", "config", "kind"}},
	// combine, the route kind: routers of the other pools' routers
	// (route's Sub), memcache and resp for the fills' wire, cluster for
	// the read-only command table.
	"combine": {parts: []string{"codec", "memcache", "resp", "backend", "route", "cluster", "config", "kind"}},
	// sentinel follows Redis masters through Sentinel; it stands alone.
	"sentinel": {},
	// spool is a file of deletes waiting for their server; it stands
	// alone.
	"spool": {},
	// proxy imports every kind in one place (kinds.go), and cluster for
	// a Redis Cluster pool's stats.
	"proxy": {parts: []string{"codec", "memcache", "resp", "backend", "route", "config", "kind",
		"shard", "cluster", "lua", "combine", "observe"}},
	// admin renders the running config (config.Marshal, the admin section)
	// and tells a config error from other reload failures.
	"admin": {parts: []string{"proxy", "config", "observe"}, external: []string{"github.com/prometheus/"}},
	// dnspool resolves a pool's servers_from into servers, for the
	// command to hand the proxy; it knows the configuration only.
	"dnspool": {parts: []string{"config"}, external: []string{"github.com/miekg/dns"}},
	// fleet is the proxy's member of a fleet over etcd: it parses the
	// configurations etcd holds and drives the proxy through an interface
	// of its own, never importing it.
	"fleet": {parts: []string{"config"}, external: []string{"go.etcd.io/etcd/client/v3", "go.etcd.io/etcd/api/v3/",
		"go.uber.org/zap", "google.golang.org/grpc"}},
	"cmd/shardproxy": {parts: []string{"proxy", "config", "admin", "dnspool", "fleet", "observe", "tracing"}},
	// proc is the one supervisor of real server processes: testserver
	// builds the tests' servers on it, soak and bench run their fleets
	// with it.
	"internal/proc": {},
	// testserver's DNS server is miekg/dns's, in the test's process.
	"internal/testserver": {internal: []string{"internal/proc"}, external: []string{"github.com/miekg/dns", "go.opentelemetry.io/proto/otlp", "google.golang.org/protobuf"}},
	"internal/faultproxy": {},
	"internal/archtest":   {},
	"internal/codectest":  {parts: []string{"codec"}},
	// mcdiff is the differential harness for memcached speakers; it
	// imports nothing of shardproxy so that any package's tests can use it.
	"internal/mcdiff": {},
	// mcbase64 is memcached's lenient base64 key decoder, the one memcache
	// (routing) and store (the cache) share so that they agree on every
	// key; it imports nothing of shardproxy.
	"internal/mcbase64": {},

	// The load generator and the benchmark harness measure shardproxy from
	// the outside: they import none of its packages, only the process
	// supervisor. bench is a module of its own (bench/go.mod) for the
	// plotting library, which is therefore no dependency of shardproxy's
	// module; nested under shardproxy/, it may import internal/proc.
	"cmd/shardbench": {external: []string{"github.com/HdrHistogram/hdrhistogram-go"}},
	"bench":          {external: []string{"gonum.org/v1/plot"}, internal: []string{"internal/proc"}},
	// The soak test runs bin/shardproxy and its backends as child
	// processes with the supervisor the tests use, and injects its faults
	// with the tests' fault proxy.
	"soak": {internal: []string{"internal/proc", "internal/faultproxy"}},
	// examples and packaging hold only tests: they run scripts/example.sh
	// and check the systemd unit and the Dockerfile.
	"examples":  {},
	"packaging": {},
	// docs is the user documentation; its one test file checks the
	// links of every Markdown file.
	"docs": {},
}

// pkg is what go list tells about one package.
type pkg struct {
	ImportPath string
	Imports    []string // non-test imports only
}

func TestImportDirection(t *testing.T) {
	dirs := moduleDirs(t)
	if len(dirs) < 2 {
		t.Fatalf("found the modules %v, want the root and bench at least", dirs)
	}
	for _, dir := range dirs {
		pkgs := listPackages(t, dir)
		if len(pkgs) == 0 {
			t.Fatalf("go list found no packages in %s", dir)
		}
		for _, v := range check(pkgs) {
			t.Error(v)
		}
	}
}

// moduleRoot is the repository root, seen from this package's directory,
// where go test runs its test.
const moduleRoot = "../.."

// moduleDirs returns the directory of every module in the repository: the
// root and the nested ones (bench/ is one, so that its plotting libraries
// stay out of shardproxy's go.mod), which ./... at the root does not reach.
// Their import paths are under shardproxy/, so the table covers them too.
func moduleDirs(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != moduleRoot && (skipDir(d.Name()) || d.Name() == "bin") {
			return filepath.SkipDir // what the go command ignores, and build output
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("find the modules: %v", err)
	}
	return dirs
}

// listPackages runs go list over the module in dir. -e keeps packages that
// do not build yet (others may be halfway through writing them): their
// imports still count.
func listPackages(t *testing.T, dir string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-e", "-json=ImportPath,Imports", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
}

// check returns one message for every import that breaks layers, sorted.
func check(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		from, ok := partOf(p.ImportPath)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s: package is not in the architecture table "+
				"(add its part to layers in internal/archtest)", p.ImportPath))
			continue
		}
		r := layers[from]
		for _, imp := range p.Imports {
			if msg := checkImport(from, r, imp); msg != "" {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s", p.ImportPath, imp, msg))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// checkImport returns why part from (with rule r) may not import imp, or "".
func checkImport(from string, r rule, imp string) string {
	switch {
	case isStd(imp):
		return ""
	case imp == module || strings.HasPrefix(imp, module+"/"):
		to, ok := partOf(imp)
		switch {
		case to == from:
			return ""
		case strings.HasPrefix(to, "internal/") || strings.HasPrefix(imp, module+"/internal/"):
			if ok && slices.Contains(r.internal, to) {
				return ""
			}
			return "internal packages are for tests only (import them from _test.go files, " +
				"or list them in the part's internal in layers)"
		case !ok:
			return "imported package is not in the architecture table"
		case len(r.parts) == 0:
			return fmt.Sprintf("%s may import no other shardproxy package (ARCHITECTURE.md)", from)
		case !slices.Contains(r.parts, to):
			return fmt.Sprintf("%s may import only %s of shardproxy (ARCHITECTURE.md)", from, list(r.parts))
		}
		return ""
	case allowedExternal(r.external, imp):
		return ""
	default:
		return fmt.Sprintf("third-party import not allowed in %s (allowed: %s); "+
			"a new dependency is a change to layers in internal/archtest", from, list(r.external))
	}
}

// partOf returns the table entry that owns the shardproxy package path: the
// longest entry that is the path or one of its parents.
func partOf(path string) (string, bool) {
	rel, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return "", false
	}
	best := ""
	for part := range layers {
		if (rel == part || strings.HasPrefix(rel, part+"/")) && len(part) > len(best) {
			best = part
		}
	}
	return best, best != ""
}

// isStd reports whether path is a standard library package: by the Go
// convention, its first element has no dot. The module's own dotless path
// and cgo's "C" are not.
func isStd(path string) bool {
	if path == "C" || path == module || strings.HasPrefix(path, module+"/") {
		return false
	}
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// allowedExternal reports whether imp is one of allowed, or a package inside
// one of them (a trailing "/" allows everything under that prefix).
func allowedExternal(allowed []string, imp string) bool {
	for _, a := range allowed {
		if strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) {
			return true
		}
		if imp == a || strings.HasPrefix(imp, a+"/") {
			return true
		}
	}
	return false
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		pkg  pkg
		want string // substring of the only violation, or "" for none
	}{
		{"stdlib", pkg{"shardproxy/codec", []string{"bufio", "net/netip", "errors"}}, ""},
		{"allowed part", pkg{"shardproxy/memcache", []string{"shardproxy/codec", "bytes"}}, ""},
		{"upward", pkg{"shardproxy/codec", []string{"shardproxy/memcache"}}, "codec may import no other shardproxy package"},
		{"sideways", pkg{"shardproxy/memcache", []string{"shardproxy/resp"}}, "memcache may import only codec"},
		{"transport from dialect", pkg{"shardproxy/resp", []string{"shardproxy/backend"}}, "may import only codec"},
		{"subpackage of allowed part", pkg{"shardproxy/cluster", []string{"shardproxy/resp/commands"}}, ""},
		{"own subpackage", pkg{"shardproxy/sharding/ketama", []string{"shardproxy/sharding"}}, ""},
		{"allowed third-party", pkg{"shardproxy/resp", []string{"github.com/tidwall/redcon"}}, ""},
		{"third-party subpackage", pkg{"shardproxy/lua", []string{"github.com/yuin/gopher-lua/parse"}}, ""},
		{"third-party tree", pkg{"shardproxy/admin", []string{"github.com/prometheus/client_golang/prometheus"}}, ""},
		{"admin renders the config", pkg{"shardproxy/admin", []string{"shardproxy/proxy", "shardproxy/config"}}, ""},
		{"admin below proxy", pkg{"shardproxy/admin", []string{"shardproxy/backend"}}, "admin may import only proxy, config"},
		{"third-party elsewhere", pkg{"shardproxy/proxy", []string{"github.com/tidwall/redcon"}}, "third-party import not allowed in proxy"},
		{"unlisted third-party", pkg{"shardproxy/config", []string{"github.com/BurntSushi/toml"}}, "third-party import not allowed in config"},
		{"name prefix of a part", pkg{"shardproxy/proxyx", nil}, "shardproxy/proxyx: package is not in the architecture table"},
		{"similar name", pkg{"shardproxy/sharding", []string{"github.com/cespare/xxhash"}}, "third-party import not allowed"},
		{"internal from code", pkg{"shardproxy/proxy", []string{"shardproxy/internal/testserver"}}, "for tests only"},
		{"unknown internal", pkg{"shardproxy/proxy", []string{"shardproxy/internal/other"}}, "for tests only"},
		{"unknown part imported", pkg{"shardproxy/proxy", []string{"shardproxy/util"}}, "not in the architecture table"},
		{"unknown part", pkg{"shardproxy/util", []string{"fmt"}}, "shardproxy/util: package is not in the architecture table"},
		{"root package", pkg{"shardproxy", nil}, "not in the architecture table"},
		{"cgo", pkg{"shardproxy/backend", []string{"C"}}, "third-party import not allowed"},
		{"cmd wiring", pkg{"shardproxy/cmd/shardproxy", []string{"shardproxy/proxy", "shardproxy/config", "shardproxy/admin", "flag"}}, ""},
		{"cmd reaching down", pkg{"shardproxy/cmd/shardproxy", []string{"shardproxy/memcache"}}, "cmd/shardproxy may import only proxy, config, admin"},
		{"testserver imports no shardproxy code", pkg{"shardproxy/internal/testserver", []string{"shardproxy/codec"}}, "internal/testserver may import no other shardproxy package"},
		{"testserver on proc", pkg{"shardproxy/internal/testserver", []string{"shardproxy/internal/proc"}}, ""},
		{"soak runs servers with proc", pkg{"shardproxy/soak", []string{"shardproxy/internal/proc", "shardproxy/internal/faultproxy"}}, ""},
		{"bench runs servers with proc", pkg{"shardproxy/bench", []string{"shardproxy/internal/proc", "gonum.org/v1/plot/vg"}}, ""},
		{"bench measures from outside", pkg{"shardproxy/bench", []string{"shardproxy/proxy"}}, "bench may import no other shardproxy package"},
		{"internal not listed", pkg{"shardproxy/soak", []string{"shardproxy/internal/testserver"}}, "for tests only"},
		{"proc stdlib only", pkg{"shardproxy/internal/proc", []string{"shardproxy/internal/testserver"}}, "for tests only"},
		{"memcache decodes keys with mcbase64", pkg{"shardproxy/memcache", []string{"shardproxy/internal/mcbase64"}}, ""},
		{"store decodes keys with mcbase64", pkg{"shardproxy/store", []string{"shardproxy/internal/mcbase64"}}, ""},
		{"store stands alone but for mcbase64", pkg{"shardproxy/store", []string{"shardproxy/codec"}}, "store may import no other shardproxy package"},
		{"mcbase64 stdlib only", pkg{"shardproxy/internal/mcbase64", []string{"shardproxy/codec"}}, "internal/mcbase64 may import no other shardproxy package"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check([]pkg{tt.pkg})
			switch {
			case tt.want == "" && len(got) != 0:
				t.Errorf("want no violation, got %q", got)
			case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
				t.Errorf("want one violation containing %q, got %q", tt.want, got)
			}
		})
	}
}

// TestLayersTable checks the table itself: every part it names is an entry,
// and the allowed imports form no cycle, so dependencies point one way.
func TestLayersTable(t *testing.T) {
	for part, r := range layers {
		for _, to := range r.parts {
			if _, ok := layers[to]; !ok || to == part || strings.HasPrefix(to, "internal/") {
				t.Errorf("layers[%q] allows %q, which is itself, internal or not an entry", part, to)
			}
		}
		for _, to := range r.internal {
			if _, ok := layers[to]; !ok || to == part || !strings.HasPrefix(to, "internal/") {
				t.Errorf("layers[%q] allows internal %q, which is itself, not internal or not an entry", part, to)
			}
		}
	}
	const (
		unseen = iota
		visiting
		done
	)
	state := make(map[string]int)
	var visit func(part string, path []string)
	visit = func(part string, path []string) {
		switch state[part] {
		case visiting:
			t.Errorf("layers has an import cycle: %s", strings.Join(append(path, part), " -> "))
			return
		case done:
			return
		}
		state[part] = visiting
		for _, to := range slices.Concat(layers[part].parts, layers[part].internal) {
			visit(to, append(path, part))
		}
		state[part] = done
	}
	for part := range layers {
		visit(part, nil)
	}
}
