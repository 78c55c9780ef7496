// Command gencommands writes resp/commands_gen.go: the Redis command table
// of the resp dialect. It starts the redis-server it finds in PATH (or the
// one -redis-server names) on a private unix socket, asks it for COMMAND,
// merges what it reports (arity, flags, key positions, subcommands) with
// the hand-written routing decisions in classes.go, and writes the table.
// It fails when the server reports a command with movable keys that
// classes.go does not decide on, so a new Redis version cannot slip a
// command past the proxy's key extraction.
//
// Run it with go generate ./resp/ (the go:generate line is in resp/command.go).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

func main() {
	out := flag.String("o", "commands_gen.go", "output file")
	bin := flag.String("redis-server", "redis-server", "redis-server binary")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("gencommands: ")

	version, entries, err := fetch(*bin)
	if err != nil {
		log.Fatal(err)
	}
	entries = append(entries, extra...)
	rows, err := classify(entries)
	if err != nil {
		log.Fatal(err)
	}
	src, err := render(version, rows)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, src, 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %d commands from redis-server %s to %s", len(rows), version, *out)
}

// entry is one command as COMMAND reports it.
type entry struct {
	name              string
	arity             int
	flags, categories []string
	first, last, step int
	subs              []entry
}

func (e *entry) has(flag string) bool { return slices.Contains(e.flags, flag) }

func (e *entry) inCategory(c string) bool { return slices.Contains(e.categories, c) }

// fetch runs redis-server on a unix socket in a temporary directory and
// returns its version and COMMAND reply.
func fetch(bin string) (string, []entry, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", nil, fmt.Errorf("%w (install redis-server: apt-get install redis-server)", err)
	}
	dir, err := os.MkdirTemp("", "gencommands")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(path, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	nc, err := dialUnix(sock)
	if err != nil {
		return "", nil, fmt.Errorf("%w\n%s", err, logs.String())
	}
	defer nc.Close()
	info, err := call(nc, "INFO", "server")
	if err != nil {
		return "", nil, err
	}
	version := infoField(info.String(), "redis_version")
	reply, err := call(nc, "COMMAND")
	if err != nil {
		return "", nil, err
	}
	var entries []entry
	reply.ForEach(func(r redcon.RESP) bool {
		entries = append(entries, parseEntry(r))
		return true
	})
	if len(entries) == 0 {
		return "", nil, errors.New("COMMAND returned no commands")
	}
	return version, entries, nil
}

func dialUnix(sock string) (net.Conn, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		nc, err := net.Dial("unix", sock)
		if err == nil {
			return nc, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("redis-server did not start: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call sends one command and reads its whole reply.
func call(nc net.Conn, args ...string) (redcon.RESP, error) {
	req := redcon.AppendArray(nil, len(args))
	for _, a := range args {
		req = redcon.AppendBulkString(req, a)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(req); err != nil {
		return redcon.RESP{}, err
	}
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := nc.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if m, r := redcon.ReadNextRESP(buf); m > 0 {
			if r.Type == redcon.Error {
				return r, fmt.Errorf("%s: %s", args[0], r.Data)
			}
			return r, nil
		}
		if err != nil {
			return redcon.RESP{}, fmt.Errorf("reading the reply to %s: %w", args[0], err)
		}
	}
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return v
		}
	}
	return "unknown"
}

// parseEntry reads [name, arity, flags, first, last, step, categories,
// tips, key specs, subcommands].
func parseEntry(r redcon.RESP) entry {
	var e entry
	i := 0
	r.ForEach(func(f redcon.RESP) bool {
		switch i {
		case 0:
			e.name = strings.ToLower(f.String())
		case 1:
			e.arity = int(f.Int())
		case 2:
			e.flags = strs(f)
		case 3:
			e.first = int(f.Int())
		case 4:
			e.last = int(f.Int())
		case 5:
			e.step = int(f.Int())
		case 6:
			e.categories = strs(f)
		case 9:
			f.ForEach(func(s redcon.RESP) bool {
				e.subs = append(e.subs, parseEntry(s))
				return true
			})
		}
		i++
		return true
	})
	return e
}

func strs(r redcon.RESP) []string {
	var out []string
	r.ForEach(func(s redcon.RESP) bool {
		out = append(out, s.String())
		return true
	})
	return out
}

// row is one line of the generated table.
type row struct {
	entry
	o override
}

// classify decides every command and subcommand.
func classify(entries []entry) ([]row, error) {
	byName := map[string]*entry{}
	var flat []*entry
	for i := range entries {
		e := &entries[i]
		if parent, _, ok := strings.Cut(e.name, "|"); ok { // an extra subcommand
			p := byName[parent]
			if p == nil {
				return nil, fmt.Errorf("extra subcommand %s of unknown %s", e.name, parent)
			}
			p.subs = append(p.subs, *e)
			continue
		}
		byName[e.name] = e
		flat = append(flat, e)
	}
	var rows []row
	var errs []error
	for _, e := range flat {
		o, err := decide(e, nil)
		if err != nil {
			errs = append(errs, err)
		}
		rows = append(rows, row{*e, o})
		for i := range e.subs {
			s := &e.subs[i]
			so, err := decide(s, &o)
			if err != nil {
				errs = append(errs, err)
			}
			rows = append(rows, row{*s, so})
		}
	}
	for name := range overrides {
		if !slices.ContainsFunc(rows, func(r row) bool { return r.name == name }) {
			errs = append(errs, fmt.Errorf("classes.go decides on %s, which the server does not have", name))
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	return rows, errors.Join(errs...)
}

// decide returns the override of e, or the class its flags and key
// positions give. parent is the decision on e's container, if any.
func decide(e *entry, parent *override) (override, error) {
	if o, ok := overrides[e.name]; ok {
		return checkOverride(e, o)
	}
	o := override{keys: keysRange}
	switch {
	case len(e.subs) > 0:
		return o, fmt.Errorf("container %s needs an entry in classes.go", e.name)
	case parent != nil && strings.HasSuffix(e.name, "|help"):
		o.class = anyServer
		return o, nil
	}
	if reason := familyReason(e); reason != "" {
		o.class, o.reason = unsupported, reason
		return o, nil
	}
	switch {
	case parent != nil: // subcommands are carried only where classes.go says so
		o.class, o.reason = unsupported, parent.subReason
	case e.has("movablekeys"):
		return o, fmt.Errorf("%s has movable keys: decide on it in classes.go", e.name)
	case e.first == 0:
		o.class, o.reason = unsupported, rNoKey
	case e.first == e.last:
		o.class = key
	default:
		o.class = same
	}
	return o, nil
}

// checkOverride completes classes.go's decision o on e (the key rule
// defaults to keysRange) and checks it fits what the server says of e.
func checkOverride(e *entry, o override) (override, error) {
	if o.keys == "" {
		o.keys = keysRange
	}
	if o.class == container && len(e.subs) == 0 {
		return o, fmt.Errorf("%s is no container", e.name)
	}
	if e.has("movablekeys") && o.class != unsupported && o.class != key && o.keys == keysRange {
		return o, fmt.Errorf("%s has movable keys and classes.go gives no key rule", e.name)
	}
	return o, nil
}

// familyReason returns why e is unsupported when its flags or categories
// put it in a family the proxy does not carry (blocking, pub/sub,
// transactions, administration), or "".
func familyReason(e *entry) string {
	switch {
	case e.has("blocking") || e.inCategory("@blocking"):
		return rBlocking
	case e.has("pubsub") || e.inCategory("@pubsub"):
		return rPubSub
	case e.inCategory("@transaction"):
		return rTransaction
	case e.has("admin") || e.inCategory("@admin"):
		return rAdmin
	}
	return ""
}

// render writes the table as Go source.
func render(version string, rows []row) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by resp/internal/gencommands from redis-server %s COMMAND; DO NOT EDIT.\n\n", version)
	b.WriteString("package resp\n\nimport \"shardproxy/codec\"\n\n")
	fmt.Fprintf(&b, "// referenceVersion is the redis-server whose COMMAND reply the table holds.\n")
	fmt.Fprintf(&b, "const referenceVersion = %q\n\n", version)
	b.WriteString("// commandTable holds every command and subcommand, sorted by name.\n")
	b.WriteString("var commandTable = [...]command{\n")
	for _, r := range rows {
		renderRow(&b, r)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// renderRow writes one command's entry: its name, arity, key positions
// and class, then the fields that differ from their zero values.
func renderRow(b *bytes.Buffer, r row) {
	fmt.Fprintf(b, "\t{name: %q, arity: %d", r.name, r.arity)
	if r.first != 0 || r.last != 0 || r.step != 0 {
		fmt.Fprintf(b, ", first: %d, last: %d, step: %d", r.first, r.last, r.step)
	}
	fmt.Fprintf(b, ", class: %s", r.o.class)
	renderOptions(b, r)
	b.WriteString("},\n")
}

// renderOptions writes the fields of a command's entry after its class,
// those that are set.
func renderOptions(b *bytes.Buffer, r row) {
	if r.o.keys != keysRange {
		fmt.Fprintf(b, ", keys: %s", r.o.keys)
	}
	if r.o.keyArg != 0 {
		fmt.Fprintf(b, ", keyArg: %d", r.o.keyArg)
	}
	if r.o.local != "" {
		fmt.Fprintf(b, ", local: %s", r.o.local)
	}
	if r.o.bare != "" {
		fmt.Fprintf(b, ", bare: %s", r.o.bare)
	}
	if r.o.block != "" {
		fmt.Fprintf(b, ", block: %s", r.o.block)
	}
	if r.o.pin != "" {
		fmt.Fprintf(b, ", pin: %s", r.o.pin)
	}
	if r.o.sub != "" {
		fmt.Fprintf(b, ", sub: %s", r.o.sub)
	}
	if r.o.reason != "" {
		fmt.Fprintf(b, ", reason: %q", r.o.reason)
	}
	if r.o.every {
		b.WriteString(", every: true")
	}
	if r.o.serverConfig {
		b.WriteString(", serverConfig: true")
	}
	if r.o.clusterView {
		b.WriteString(", clusterView: true")
	}
	if r.o.txOne {
		b.WriteString(", txOne: true")
	}
	if r.has("no_auth") {
		b.WriteString(", noAuth: true")
	}
}
