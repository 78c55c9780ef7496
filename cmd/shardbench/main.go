package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// Exit statuses.
const (
	exitOK    = 0
	exitWrong = 1 // wrong replies, or the run could not start
	exitUsage = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: it parses args, runs the benchmark and prints
// the result on stdout, and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shardbench: %v\n", err)
		return exitUsage
	}
	if cfg.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Procs))
	}
	if cfg.CPUProfile != "" {
		stop, err := startProfile(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "shardbench: %v\n", err)
			return exitUsage
		}
		defer stop()
	}
	res, err := execute(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "shardbench: %v\n", err)
		return exitWrong
	}
	if cfg.JSON {
		err = res.writeJSON(stdout)
	} else {
		err = res.writeText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "shardbench: write result: %v\n", err)
		return exitWrong
	}
	if res.Errors > 0 {
		fmt.Fprintf(stderr, "shardbench: %d wrong replies\n", res.Errors)
		return exitWrong
	}
	return exitOK
}

// startProfile starts a CPU profile into path and returns what stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
