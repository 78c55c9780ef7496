package main

import (
	"fmt"
	"time"

	"shardproxy/internal/faultproxy"
	"shardproxy/internal/proc"
)

// garbage is what the "garbage" fault writes to shardproxy on its backend
// connections behind a fault proxy: no valid memcached or RESP reply.
var garbage = []byte("\x00\xffGARBAGE\x01 not a reply\r\n")

// faultKinds are the faults injected in turn, each for a second.
var faultKinds = []string{"latency", "blackhole", "reset", "garbage", "stop-start", "none"}

// chaos counts what the run did to the proxy: the faults injected, by kind,
// and the reloads. injectFaults writes faults and reloadLoop the reloads,
// each from its own goroutine; they are read once both have returned.
type chaos struct {
	faults               map[string]int
	reloads, reloadFails int
}

// injectFaults injects one fault every period, in turn, into both fault
// proxies, until stop closes.
func (r *rig) injectFaults(stop <-chan struct{}, every time.Duration, ch *chaos) {
	ticks(stop, every, func(i int) {
		f := faultKinds[i%len(faultKinds)]
		ch.faults[f]++
		r.fault(f)
		sleepOr(stop, time.Second)
		r.clearFault(f)
	})
}

// ticks calls do every period, with 0, 1, 2, ..., until stop closes.
func ticks(stop <-chan struct{}, every time.Duration, do func(i int)) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		do(i)
	}
}

// faulted are the fault proxies and the servers behind them, in pairs.
func (r *rig) faulted() ([2]*faultproxy.Proxy, [2]*proc.Process) {
	return [2]*faultproxy.Proxy{r.mcFault, r.rdFault}, [2]*proc.Process{r.mcs[0], r.rds[0]}
}

// fault starts fault f on both fault proxies.
func (r *rig) fault(f string) {
	fps, bes := r.faulted()
	for j, fp := range fps {
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
			bes[j].Stop()
		}
	}
}

// clearFault ends fault f on both fault proxies.
func (r *rig) clearFault(f string) {
	fps, bes := r.faulted()
	for j, fp := range fps {
		fp.Clear()
		if f == "stop-start" {
			if err := bes[j].Start(); err != nil {
				fmt.Println("soak: restart:", err)
			}
		}
	}
}

// reloadLoop rewrites the configuration and reloads the proxy every
// period until stop closes. Every reload changes the pools: the timeout,
// and the memcache pool's server_protocol (new sockets, new handshake)
// while requests are in flight on the old ones.
func (r *rig) reloadLoop(stop <-chan struct{}, every time.Duration, ch *chaos) {
	ticks(stop, every, func(i int) {
		timeout, serverProtocol := 500, "text"
		if i%2 == 0 {
			timeout, serverProtocol = 600, "meta"
		}
		err := r.writeConfig(timeout, serverProtocol)
		if err == nil {
			err = reload(r.admin)
		}
		ch.reloads++
		if err != nil {
			ch.reloadFails++
			fmt.Println("soak: reload:", err)
		}
	})
}
