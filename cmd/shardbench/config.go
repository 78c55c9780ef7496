package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// config is one run's settings, from the command line.
type config struct {
	Addr      string        `json:"addr"`
	Proto     string        `json:"proto"`
	Conns     int           `json:"conns"`
	Pipeline  int           `json:"pipeline"`
	Keys      int           `json:"keys"`
	Dist      string        `json:"dist"`
	ZipfTheta float64       `json:"zipf_theta,omitempty"`
	Value     int           `json:"value"`
	Ratio     string        `json:"ratio"`
	MGet      int           `json:"mget"`
	Duration  time.Duration `json:"-"`
	Requests  int64         `json:"requests,omitempty"`
	Warmup    time.Duration `json:"-"`
	Prefill   bool          `json:"prefill"`
	Rate      float64       `json:"rate,omitempty"`
	Timeout   time.Duration `json:"-"`
	Seed      uint64        `json:"seed"`
	Prefix    string        `json:"prefix"`

	JSON       bool   `json:"-"`
	CPUProfile string `json:"-"`
	Procs      int    `json:"procs"`
	ServerPIDs []int  `json:"server_pids,omitempty"`

	setWeight, getWeight int // from Ratio
}

// minValue is the smallest value size: the header that makes a value
// checkable.
const minValue = headerLen

// parseConfig parses the command line. Usage errors are written to stderr.
func parseConfig(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("shardbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: shardbench [flags]   (see go doc shardproxy/cmd/shardbench)")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:22120", "server `host:port`")
	fs.StringVar(&c.Proto, "proto", "text", "protocol: text (memcached), meta (memcached meta) or resp (Redis)")
	fs.IntVar(&c.Conns, "conns", 50, "connections, one goroutine each")
	fs.IntVar(&c.Pipeline, "pipeline", 1, "requests written per batch on a connection before reading their replies")
	fs.IntVar(&c.Keys, "keys", 10000, "key space size")
	fs.StringVar(&c.Dist, "dist", "uniform", "key distribution: uniform or zipf")
	fs.Float64Var(&c.ZipfTheta, "zipf-theta", 0.99, "zipf skew, 0 < theta < 1 (YCSB's default 0.99)")
	fs.IntVar(&c.Value, "value", 100, fmt.Sprintf("value size in bytes (>= %d)", minValue))
	fs.StringVar(&c.Ratio, "ratio", "1:9", "set:get ratio, such as 1:9, 0:1 (gets only) or 1:0 (sets only)")
	fs.IntVar(&c.MGet, "mget", 1, "keys per get: >1 makes every get a multi-get of that many distinct keys")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured time, after the warmup (ignored with -requests)")
	fs.Int64Var(&c.Requests, "requests", 0, "measured requests in total, instead of -duration")
	fs.DurationVar(&c.Warmup, "warmup", time.Second, "unmeasured load before the measured part")
	fs.BoolVar(&c.Prefill, "prefill", true, "set every key once before the load, so that every miss is a wrong reply")
	fs.Float64Var(&c.Rate, "rate", 0, "target requests per second over all connections; 0 = as fast as possible. "+
		"Latency counts from each batch's scheduled start")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "longest wait for a batch's replies; then the connection is redialed")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed for the key and operation choices")
	fs.StringVar(&c.Prefix, "prefix", "", "key prefix; default sb + 8 random hex digits + ':', fresh for every run")
	fs.BoolVar(&c.JSON, "json", false, "print the result as JSON")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write the generator's own CPU profile to `file`")
	fs.IntVar(&c.Procs, "procs", 0, "threads running the connections (GOMAXPROCS); 0 = every core. "+
		"On a small machine -procs 1 leaves more to the servers under test, as redis-benchmark does")
	pids := fs.String("server-pid", "", "comma-separated `pids` whose CPU time (from /proc) is reported per request")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := c.finish(*pids); err != nil {
		return nil, err
	}
	return c, nil
}

// finish validates c and fills in what derives from the flags.
func (c *config) finish(pids string) error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	_, known := protocols[c.Proto]
	check(known, "-proto %q: want text, meta or resp", c.Proto)
	check(c.Conns >= 1, "-conns %d: want >= 1", c.Conns)
	check(c.Pipeline >= 1, "-pipeline %d: want >= 1", c.Pipeline)
	check(c.Keys >= 1, "-keys %d: want >= 1", c.Keys)
	check(c.Dist == "uniform" || c.Dist == "zipf", "-dist %q: want uniform or zipf", c.Dist)
	check(c.Dist != "zipf" || (c.ZipfTheta > 0 && c.ZipfTheta < 1), "-zipf-theta %g: want 0 < theta < 1", c.ZipfTheta)
	check(c.Value >= minValue, "-value %d: want >= %d (the header that makes a value checkable)", c.Value, minValue)
	check(c.MGet >= 1 && c.MGet <= c.Keys, "-mget %d: want 1..keys", c.MGet)
	check(c.Duration > 0 || c.Requests > 0, "-duration or -requests must be positive")
	check(c.Requests >= 0, "-requests %d: want >= 0", c.Requests)
	check(c.Warmup >= 0, "-warmup %v: want >= 0", c.Warmup)
	check(c.Rate >= 0, "-rate %g: want >= 0", c.Rate)
	check(c.Timeout > 0, "-timeout %v: want > 0", c.Timeout)
	var err error
	c.setWeight, c.getWeight, err = parseRatio(c.Ratio)
	check(err == nil, "-ratio %q: %v", c.Ratio, err)
	for _, f := range strings.FieldsFunc(pids, func(r rune) bool { return r == ',' || r == ' ' }) {
		pid, err := strconv.Atoi(f)
		check(err == nil && pid > 0, "-server-pid %q: want process ids", f)
		c.ServerPIDs = append(c.ServerPIDs, pid)
	}
	if c.Dist != "zipf" {
		c.ZipfTheta = 0
	}
	if c.Prefix == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		c.Prefix = "sb" + hex.EncodeToString(b[:]) + ":"
	}
	check(len(c.Prefix)+len(strconv.Itoa(c.Keys-1)) <= 250, "-prefix: keys would be longer than 250 bytes")
	check(!strings.ContainsAny(c.Prefix, " \r\n\t"), "-prefix %q: no spaces or control characters", c.Prefix)
	return errors.Join(errs...)
}

// parseRatio parses "S:G" into its two weights; at least one is positive.
func parseRatio(s string) (set, get int, err error) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, errors.New("want set:get, such as 1:9")
	}
	set, err1 := strconv.Atoi(a)
	get, err2 := strconv.Atoi(b)
	switch {
	case err1 != nil || err2 != nil || set < 0 || get < 0:
		return 0, 0, errors.New("want two non-negative integers")
	case set+get == 0:
		return 0, 0, errors.New("one side must be positive")
	}
	return set, get, nil
}
