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

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/proc"
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

// garbage is what the "garbage" fault writes to shardproxy on its backend
// connections behind a fault proxy: no valid memcached or RESP reply.
var garbage = []byte("\x00\xffGARBAGE\x01 not a reply\r\n")

type sample struct {
	label      string
	rssKB      int64
	goroutines int
}

func run(duration time.Duration, proxyBin string, nclients int, faultEvery, reloadEvery time.Duration, rssFactor float64, goroutineSlack int) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	interrupted := make(chan struct{})
	go func() {
		<-sig
		fmt.Println("soak: interrupted, stopping")
		close(interrupted)
	}()

	dir, err := os.MkdirTemp("", "soak-")
	if err != nil {
		fmt.Println("soak:", err)
		return 2
	}
	servers := &fleet{dir: dir}
	defer servers.stop()

	fail := func(err error) int { fmt.Println("soak:", err, "(logs kept in", dir+")"); return 2 }

	// Three of each; index 0 sits behind a fault proxy.
	var mcs, rds []*proc.Process
	for i := range 3 {
		mc, err := servers.memcached(fmt.Sprintf("memcached-%d", i))
		if err != nil {
			return fail(err)
		}
		mcs = append(mcs, mc)
		rd, err := servers.redis(fmt.Sprintf("redis-%d", i))
		if err != nil {
			return fail(err)
		}
		rds = append(rds, rd)
	}
	mcFault, err := faultproxy.Listen(mcs[0].Addr())
	if err != nil {
		return fail(err)
	}
	defer mcFault.Close()
	rdFault, err := faultproxy.Listen(rds[0].Addr())
	if err != nil {
		return fail(err)
	}
	defer rdFault.Close()

	var ports [4]int
	for i := range ports {
		if ports[i], err = proc.FreePort(); err != nil {
			return fail(err)
		}
	}
	mcListen := fmt.Sprintf("127.0.0.1:%d", ports[0])
	rdListen := fmt.Sprintf("127.0.0.1:%d", ports[1])
	admin := fmt.Sprintf("127.0.0.1:%d", ports[2])
	cfgPath := dir + "/soak.yml"
	writeConfig := func(timeout int, serverProtocol string) error {
		cfg := fmt.Sprintf(`mc:
  listen: %s
  hash: fnv1a_64
  distribution: ketama
  timeout: %d
  server_protocol: %s
  server_failure_limit: 3
  server_retry_timeout: 1000
  auto_eject_hosts: false
  servers:
    - %s:1 mc0
    - %s:1 mc1
    - %s:1 mc2
rd:
  listen: %s
  redis: true
  hash: fnv1a_64
  distribution: ketama
  timeout: %d
  server_failure_limit: 3
  server_retry_timeout: 1000
  auto_eject_hosts: false
  servers:
    - %s:1 rd0
    - %s:1 rd1
    - %s:1 rd2
`, mcListen, timeout, serverProtocol, mcFault.Addr(), mcs[1].Addr(), mcs[2].Addr(),
			rdListen, timeout, rdFault.Addr(), rds[1].Addr(), rds[2].Addr())
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(cfg), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, cfgPath)
	}
	if err := writeConfig(500, "text"); err != nil {
		return fail(err)
	}
	proxyLog := dir + "/shardproxy.log"
	proxy, err := servers.start("shardproxy", proxyBin, []string{"-c", cfgPath, "--admin", admin,
		"-s", strconv.Itoa(ports[3]), "-a", "127.0.0.1", "-o", proxyLog, "-v", "4"}, mcListen, nil)
	if err != nil {
		return fail(err)
	}
	if err := waitListen(rdListen); err != nil {
		return fail(err)
	}
	fmt.Printf("soak: %s for %s; memcached %s, redis %s, admin %s; logs in %s\n",
		proxyBin, duration, mcListen, rdListen, admin, dir)

	measure := func(label string) sample {
		s := sample{label: label, rssKB: rssKB(proxy.Pid()), goroutines: goroutines(admin)}
		fmt.Printf("soak: %-6s rss %d kB, goroutines %d\n", label, s.rssKB, s.goroutines)
		return s
	}
	var samples []sample
	samples = append(samples, measure("start"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var tallies []*tally
	for i := range 2 * nclients {
		redis := i%2 == 1
		c := &client{redis: redis, addr: mcListen, prefix: fmt.Sprintf("mc:c%d", i), keys: keyTable{}, t: newTally()}
		if redis {
			c.addr, c.prefix = rdListen, fmt.Sprintf("rd:c%d", i)
		}
		tallies = append(tallies, c.t)
		wg.Add(1)
		go func() { defer wg.Done(); c.run(stop) }()
	}

	// Faults and reloads.
	var bg sync.WaitGroup
	faultLog := map[string]int{}
	var faultMu sync.Mutex
	reloads, reloadFails := 0, 0
	bg.Add(2)
	go func() {
		defer bg.Done()
		faults := []string{"latency", "blackhole", "reset", "garbage", "stop-start", "none"}
		tick := time.NewTicker(faultEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			f := faults[i%len(faults)]
			faultMu.Lock()
			faultLog[f]++
			faultMu.Unlock()
			for j, fp := range []*faultproxy.Proxy{mcFault, rdFault} {
				be := []*proc.Process{mcs[0], rds[0]}[j]
				switch f {
				case "latency": // both ways: a round trip takes 1.4 s, past the pools' timeout
					fp.Latency(faultproxy.Upstream, 700*time.Millisecond, 0)
					fp.Latency(faultproxy.Downstream, 700*time.Millisecond, 0)
				case "blackhole": // nothing moves either way until it ends; bytes are held, not lost
					fp.Hold(faultproxy.Upstream, true)
					fp.Hold(faultproxy.Downstream, true)
				case "reset": // every open connection, RST to both sides
					fp.ResetAll()
				case "garbage": // read by shardproxy as a server reply
					fp.InjectNow(faultproxy.Downstream, garbage)
				case "stop-start":
					be.Stop()
				}
			}
			sleepOr(stop, time.Second)
			for j, fp := range []*faultproxy.Proxy{mcFault, rdFault} {
				be := []*proc.Process{mcs[0], rds[0]}[j]
				fp.Clear()
				if f == "stop-start" {
					if err := be.Start(); err != nil {
						fmt.Println("soak: restart:", err)
					}
				}
			}
		}
	}()
	go func() {
		defer bg.Done()
		tick := time.NewTicker(reloadEvery)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// Every reload changes the pools: the timeout, and the
			// memcache pool's server_protocol (new sockets, new
			// handshake) while requests are in flight on the old ones.
			timeout, serverProtocol := 500, "text"
			if i%2 == 1 {
				timeout, serverProtocol = 600, "meta"
			}
			err := writeConfig(timeout, serverProtocol)
			if err == nil {
				err = reload(admin)
			}
			reloads++
			if err != nil {
				reloadFails++
				fmt.Println("soak: reload:", err)
			}
		}
	}()

	start := time.Now()
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	middle := time.After(duration / 2)
	end := time.After(duration)
	wasInterrupted := false
loop:
	for {
		select {
		case <-middle:
			samples = append(samples, measure("middle"))
		case <-end:
			break loop
		case <-interrupted:
			wasInterrupted = true
			break loop
		case <-progress.C:
			total := newTally()
			for _, t := range tallies {
				total.add(t)
			}
			fmt.Printf("soak: %s requests %d, wrong %d, lost %d\n", time.Since(start).Round(time.Second), total.requests, total.wrong, total.lost)
		}
	}
	if len(samples) == 1 {
		samples = append(samples, measure("middle"))
	}
	samples = append(samples, measure("end"))
	close(stop)
	bg.Wait()
	wg.Wait()

	total := newTally()
	for _, t := range tallies {
		total.add(t)
	}
	exited := !proxy.Running()
	code := report(total, samples, faultLog, reloads, reloadFails, time.Since(start), rssFactor, goroutineSlack, exited)
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

func report(t *tally, samples []sample, faults map[string]int, reloads, reloadFails int, elapsed time.Duration, rssFactor float64, slack int, proxyDied bool) int {
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
	for k, v := range faults {
		fs = append(fs, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(fs)
	fmt.Printf("faults         %s\n", strings.Join(fs, " "))
	fmt.Printf("reloads        %d (%d failed)\n", reloads, reloadFails)
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
	verdict(reloadFails == 0, "reloads failed")
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
