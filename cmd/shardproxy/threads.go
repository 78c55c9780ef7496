package main

// threads returns how many threads run the proxy (GOMAXPROCS) for the
// -threads flag: the flag when set; else Go's figure (cores, the number of
// cores the process may use as Go counts them, honouring CPU affinity and
// a cgroup's CPU limit) when the GOMAXPROCS environment variable set it;
// else half of cores, at least 1.
//
// Half, because the proxy is rarely alone on its host: the kernel's
// network work for its sockets runs beside it, and on a small host it
// shares the cores with its servers or clients, where a second thread
// mostly wakes, spins and steals work from the first (on the 2-core bench
// box one thread served as many requests at less CPU per request; docs/operations.md,
// Command line). On a big host half the cores is still far more than a
// proxy's load needs: one thread served 100,000 unpipelined requests a
// second on that box at 0.6 of a core.
func threads(flag int, fromEnv bool, cores int) int {
	switch {
	case flag > 0:
		return flag
	case fromEnv:
		return cores
	}
	return max(1, cores/2)
}
