// Command soak runs bin/shardproxy for a long time under mixed memcached
// and Redis load while a fault proxy in front of one memcached and one
// redis-server injects faults and the configuration is reloaded every 10 s
// (alternating the memcache pool between server_protocol text and meta).
// Every reply is checked (values encode key and version); it exits non-zero
// on a wrong or lost reply or when the proxy's RSS or goroutine count grows
// between the middle and the end of the run. `make soak DURATION=10m`.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	duration := flag.Duration("duration", 10*time.Minute, "how long to run the load")
	proxyBin := flag.String("proxy", "bin/shardproxy", "shardproxy binary")
	clients := flag.Int("clients", 4, "client goroutines per protocol")
	faultEvery := flag.Duration("fault-every", 3*time.Second, "time between faults")
	reloadEvery := flag.Duration("reload-every", 10*time.Second, "time between reloads")
	rssFactor := flag.Float64("rss-factor", 2, "allowed RSS growth factor, middle to end")
	goroutineSlack := flag.Int("goroutine-slack", 50, "allowed goroutine growth, middle to end")
	flag.Parse()
	code := run(*duration, *proxyBin, *clients, *faultEvery, *reloadEvery, *rssFactor, *goroutineSlack)
	os.Exit(code)
}

type sample struct {
	label      string
	rssKB      int64
	goroutines int
}

// run runs the soak test and returns the exit code: 0 when it passed, 1
// when it failed, 2 when it could not start, 130 when interrupted.
func run(duration time.Duration, proxyBin string, nclients int, faultEvery, reloadEvery time.Duration, rssFactor float64, goroutineSlack int) int {
	interrupted := onInterrupt()
	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		fmt.Println("soak:", err)
		return 2
	}
	r := newRig(dir)
	defer r.close()
	if err := r.start(proxyBin); err != nil {
		fmt.Println("soak:", err, "(logs kept in", dir+")")
		return 2
	}
	fmt.Printf("soak: %s for %s; memcached %s, redis %s, admin %s; logs in %s\n",
		proxyBin, duration, r.mcListen, r.rdListen, r.admin, dir)
	samples := []sample{r.measure("start")}

	stop := make(chan struct{})
	var wg, bg sync.WaitGroup
	tallies := r.startClients(nclients, stop, &wg)
	ch := &chaos{faults: map[string]int{}}
	bg.Add(2)
	go func() { defer bg.Done(); r.injectFaults(stop, faultEvery, ch) }()
	go func() { defer bg.Done(); r.reloadLoop(stop, reloadEvery, ch) }()

	start := time.Now()
	samples, wasInterrupted := r.watch(duration, interrupted, tallies, samples)
	samples = append(samples, r.measure("end"))
	close(stop)
	bg.Wait()
	wg.Wait()

	exited := !r.proxy.Running()
	code := report(sum(tallies), samples, ch, time.Since(start), rssFactor, goroutineSlack, exited)
	if wasInterrupted && code == 0 {
		code = 130
	}
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		// A failed run keeps the proxy's and the servers' logs to read.
		fmt.Println("soak: logs kept in", dir)
	}
	return code
}

// onInterrupt returns a channel closed on SIGINT or SIGTERM.
func onInterrupt() <-chan struct{} {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	interrupted := make(chan struct{})
	go func() {
		<-sig
		fmt.Println("soak: interrupted, stopping")
		close(interrupted)
	}()
	return interrupted
}

func report(t *tally, samples []sample, ch *chaos, elapsed time.Duration, rssFactor float64, slack int, proxyDied bool) int {
	fmt.Printf("\n== soak report (%s) ==\n", elapsed.Round(time.Second))
	fmt.Printf("requests       %d\n", t.requests)
	fmt.Printf("correct        %d\n", t.correct)
	var causes []string
	var nerr int64
	for k, v := range t.errors {
		causes = append(causes, k)
		nerr += v
	}
	sort.Strings(causes)
	fmt.Printf("errors         %d\n", nerr)
	for _, k := range causes {
		fmt.Printf("  %-40s %d\n", k, t.errors[k])
	}
	fmt.Printf("wrong          %d (must be 0)\n", t.wrong)
	for _, w := range t.wrongLog {
		fmt.Printf("  %s\n", w)
	}
	fmt.Printf("lost           %d (must be 0)\n", t.lost)
	var fs []string
	for k, v := range ch.faults {
		fs = append(fs, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(fs)
	fmt.Printf("faults         %s\n", strings.Join(fs, " "))
	fmt.Printf("reloads        %d (%d failed)\n", ch.reloads, ch.reloadFails)
	for _, s := range samples {
		fmt.Printf("%-6s         rss %d kB, goroutines %d\n", s.label, s.rssKB, s.goroutines)
	}
	code := 0
	verdict := func(ok bool, what string) {
		if !ok {
			fmt.Println("FAIL:", what)
			code = 1
		}
	}
	verdict(t.wrong == 0, "wrong replies")
	verdict(t.lost == 0, "lost replies")
	verdict(!proxyDied, "shardproxy exited")
	verdict(ch.reloadFails == 0, "reloads failed")
	mid, end := samples[len(samples)-2], samples[len(samples)-1]
	verdict(mid.rssKB > 0 && float64(end.rssKB) <= rssFactor*float64(mid.rssKB),
		fmt.Sprintf("RSS grew more than %.1fx from middle to end", rssFactor))
	verdict(mid.goroutines >= 0 && end.goroutines >= 0 && end.goroutines <= mid.goroutines+slack,
		fmt.Sprintf("goroutines grew by more than %d from middle to end", slack))
	verdict(t.correct > 0, "no correct replies at all")
	if code == 0 {
		fmt.Printf("PASS (tolerance: RSS end <= %.1fx middle, goroutines end <= middle+%d)\n", rssFactor, slack)
	}
	return code
}

func sleepOr(stop <-chan struct{}, d time.Duration) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// goroutines scrapes go_goroutines from the admin /metrics; -1 on failure.
func goroutines(admin string) int {
	resp, err := httpClient.Get("http://" + admin + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return int(f)
			}
		}
	}
	return -1
}

func reload(admin string) error {
	resp, err := httpClient.Post("http://"+admin+"/reload", "text/plain", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /reload: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}
