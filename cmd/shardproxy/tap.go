package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"shardproxy/admin"
	"shardproxy/observe"
)

const tapUsage = `usage: shardproxy tap [--admin HOST:PORT] [--token TOKEN] [--pool P] [--command C]
                      [--key GLOB] [--backend NAME] [--min DURATION] [--sample SHARE]
prints the requests a running proxy serves that pass the filters, one line each,
as redis-cli monitor does, until interrupted; "skipped=N" says N lines were lost
because this command read too slowly.`

// tapCommand is "shardproxy tap ...": it follows GET /tap of a running
// proxy's admin server and returns the exit code.
func tapCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shardproxy tap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, tapUsage) }
	addr := fs.String("admin", admin.DefaultHTTPAddr, "the proxy's admin HTTP address")
	token := fs.String("token", os.Getenv("SHARDPROXY_ADMIN_TOKEN"), "the admin_token, if the proxy sets one (default $SHARDPROXY_ADMIN_TOKEN)")
	var f observe.Filter
	fs.StringVar(&f.Pool, "pool", "", "only this pool's requests")
	fs.StringVar(&f.Command, "command", "", "only this command's (as the dialect names it: get, set, hget)")
	fs.StringVar(&f.Key, "key", "", "only requests whose first key matches this glob (* any run, ? any byte)")
	fs.StringVar(&f.Backend, "backend", "", "only requests whose (slowest) server has this name")
	fs.DurationVar(&f.Min, "min", 0, "only requests that took at least this long (10ms)")
	fs.Float64Var(&f.Sample, "sample", 0, "show this share of the matching requests (0.01: one in a hundred)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if f.Sample < 0 || f.Sample > 1 {
		fmt.Fprintln(stderr, "shardproxy tap: --sample must be between 0 and 1")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := tap(ctx, *addr, *token, f, stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "shardproxy tap:", err)
		return 1
	}
	return 0
}

// tap copies the tap's lines to out until ctx ends or the proxy closes.
func tap(ctx context.Context, addr, token string, f observe.Filter, out io.Writer) error {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/tap?"+f.Query().Encode(), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	r := bufio.NewReader(resp.Body)
	w := bufio.NewWriter(out)
	for {
		line, err := r.ReadSlice('\n')
		w.Write(line)
		if r.Buffered() == 0 || err != nil {
			if ferr := w.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil && err != bufio.ErrBufferFull {
			return err
		}
	}
}
