package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"shardproxy/config"
	"shardproxy/fleet"
	"shardproxy/proxy"
)

const fleetUsage = `usage: shardproxy fleet put -c FILE --etcd HOST:PORT,... --etcd-prefix /shardproxy/NAME
       shardproxy fleet status --etcd ... --etcd-prefix ...
       shardproxy fleet get --etcd ... --etcd-prefix ...
put validates FILE as -t does, then publishes it and prints its etcd revision;
status prints each live proxy's configuration revision and checksum and ring
versions, and the fleet's rings; get prints the configuration etcd holds.`

// fleetCommand is "shardproxy fleet ...": it returns the exit code.
func fleetCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || !slices.Contains([]string{"put", "status", "get"}, args[0]) {
		fmt.Fprintln(stderr, fleetUsage)
		return 2
	}
	verb := args[0]
	var ff fleetFlags
	var conf string
	fs := flag.NewFlagSet("shardproxy fleet "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ff.add(fs)
	fs.StringVar(&conf, "c", "", "the configuration file to publish (put)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for etcd")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	fl, err := ff.section()
	if err == nil && fl == nil {
		err = fmt.Errorf("--etcd and --etcd-prefix are needed")
	}
	if err == nil && verb == "put" && conf == "" {
		err = fmt.Errorf("put needs -c FILE")
	}
	if err != nil {
		fmt.Fprintln(stderr, "shardproxy fleet:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err = fleetVerb(ctx, verb, fl, conf, stdout); err != nil {
		fmt.Fprintln(stderr, "shardproxy fleet:", err)
		return 1
	}
	return 0
}

// fleetVerb does one fleet command against etcd.
func fleetVerb(ctx context.Context, verb string, fl *config.Fleet, conf string, stdout io.Writer) error {
	var cfg *config.Config
	if verb == "put" { // validated before etcd is reached at all
		var err error
		if cfg, err = validate(conf); err != nil {
			return err
		}
	}
	conn, err := fleet.ConnOf(fl)
	if err != nil {
		return err
	}
	cli, err := fleet.Dial(conn)
	if err != nil {
		return err
	}
	defer cli.Close()
	switch verb {
	case "put":
		data, err := os.ReadFile(cfg.Source)
		if err != nil {
			return err
		}
		rev, err := fleet.Put(ctx, cli, fl.Prefix, data)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "published %s as %s/config at revision %d, checksum %.12s\n", conf, fl.Prefix, rev, proxy.Checksum(cfg))
	case "get":
		data, rev, err := fleet.Get(ctx, cli, fl.Prefix, 10*time.Second)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "# %s/config at revision %d\n%s", fl.Prefix, rev, data)
	case "status":
		st, err := fleet.ReadStatus(ctx, cli, fl.Prefix)
		if err != nil {
			return err
		}
		return printStatus(st, fl.Prefix, stdout)
	}
	return nil
}

// validate reads a file to publish and checks it as -t does; a file with
// a fleet: section is refused, as every proxy would refuse it.
func validate(path string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if cfg.Fleet != nil {
		return nil, fmt.Errorf("%s: a configuration for etcd may not hold a fleet: section (each proxy's own file or flags say where the fleet is)", path)
	}
	if err := checkPools(cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// printStatus prints what etcd holds of the fleet: the configuration's
// revision, the rings, the reports, and one line per live proxy.
func printStatus(st *fleet.Status, prefix string, w io.Writer) error {
	fmt.Fprintf(w, "fleet %s at etcd revision %d: configuration revision %d, %d proxies\n",
		prefix, st.Revision, st.ConfigRevision, len(st.Proxies))
	for _, pool := range sortedKeys(st.Rings) {
		r := st.Rings[pool]
		fmt.Fprintf(w, "ring %s: version %d, ejected [%s]\n", pool, r.Version, strings.Join(r.Ejected, " "))
	}
	for _, pool := range sortedKeys(st.Reports) {
		for _, server := range sortedKeys(st.Reports[pool]) {
			fmt.Fprintf(w, "failing %s/%s: reported by %s\n", pool, server, strings.Join(st.Reports[pool][server], " "))
		}
	}
	for _, k := range st.Bad {
		fmt.Fprintf(w, "unreadable key %s\n", k)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tHOST\tPID\tVERSION\tCONFIG\tCHECKSUM\tRINGS\tETCD_ERRORS")
	for _, p := range st.Proxies {
		var rings []string
		for _, pool := range sortedKeys(p.Rings) {
			rings = append(rings, fmt.Sprintf("%s@%d", pool, p.Rings[pool]))
		}
		sum := p.ConfigChecksum
		if len(sum) > 12 {
			sum = sum[:12]
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%d\n", p.ID, p.Host, p.PID, p.Version, p.ConfigRevision,
			or(sum, "-"), or(strings.Join(rings, ","), "-"), p.EtcdErrors)
	}
	return tw.Flush()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
