package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"shardproxy/internal/proc"
)

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on every Linux
// architecture Go supports.
const clockTick = 10 * time.Millisecond

// hostBusy returns the CPU time all CPUs have spent running processes since
// boot, from the first line of /proc/stat: user, nice, system and steal
// (time the hypervisor gave to others: CPU the run did not get). It leaves
// out idle and iowait, and irq and softirq too: the kernel charges those to
// no process, and on loopback most of them are the benchmark's own packets.
func hostBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseHostBusy(b)
}

// parseHostBusy parses "cpu  user nice system idle iowait irq softirq steal
// guest guest_nice"; guest time is already part of user.
func parseHostBusy(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 8} { // user, nice, system, steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// procCPU returns utime+stime of process pid from /proc/PID/stat (fields 14
// and 15, counted after the parenthesised command name).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	u, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	s, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(u+s) * clockTick, nil
}

// ownCPU returns the CPU time of the harness and every live process of the
// fleet.
func (f *fleet) ownCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	f.mu.Lock()
	all := append(append(append([]*proc.Process(nil), f.others...), f.mc...), f.rd...)
	f.mu.Unlock()
	for _, p := range all {
		if p.Running() {
			if d, err := procCPU(p.Pid()); err == nil {
				total += d
			}
		}
	}
	return total
}

// loadMeter measures the CPU that processes outside the benchmark used
// during a run: the machine's busy time minus the harness's, the fleet's and
// the load generator's. On a shared machine it shows which figures were
// taken while something else ran.
type loadMeter struct {
	start      time.Time
	host, ours time.Duration
	ok         bool
}

func (h *harness) startMeter() loadMeter {
	host, err := hostBusy()
	return loadMeter{start: time.Now(), host: host, ours: h.fleet.ownCPU(), ok: err == nil}
}

// otherCores returns the average number of cores others kept busy since
// start; client is the load generator's CPU time. NaN when unknown.
func (m loadMeter) otherCores(h *harness, client time.Duration) float64 {
	host, err := hostBusy()
	wall := time.Since(m.start)
	if !m.ok || err != nil || wall <= 0 {
		return nan
	}
	other := (host - m.host) - (h.fleet.ownCPU() - m.ours) - client
	return max(0, other.Seconds()/wall.Seconds())
}
