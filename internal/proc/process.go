package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// defaultReadyTimeout is Config.ReadyTimeout's default: generous,
	// because CI runs every package's tests at once under -race.
	defaultReadyTimeout = 15 * time.Second
	// pollInterval is the pause between two readiness probes.
	pollInterval = 20 * time.Millisecond
	// errorLines is how many of the last output lines a Start error quotes.
	errorLines = 3
)

// ErrAddrInUse marks a Start that failed because the server's port was
// taken: the server exited saying "address already in use". A caller that
// chose the port may choose another and start again.
var ErrAddrInUse = errors.New("proc: address already in use")

// Config says how to run one server. Only Path is required.
type Config struct {
	// Name names the server in messages ("memcached"); "" is Path's base
	// name.
	Name string
	// Path is the binary; LookPath finds a server's.
	Path string
	// Args are the arguments after the binary's name.
	Args []string
	// Addr is the address the server listens on, "127.0.0.1:PORT": what
	// Ready probes and what messages name.
	Addr string
	// Ready probes Addr once and returns nil when the server answers; nil
	// is AcceptsTCP. MemcachedReady and RedisReady speak the protocols.
	Ready func(addr string) error
	// ReadyTimeout bounds how long Start waits for Ready; 0 is 15 s.
	ReadyTimeout time.Duration
	// LogFile, if set, is a file the server's stdout and stderr are
	// appended to (created when missing), besides the copy in memory.
	// Several Processes may share one.
	LogFile string
	// StopGrace, if positive, makes Stop send SIGTERM and kill the server
	// only when it has not exited StopGrace later; 0 kills at once.
	StopGrace time.Duration
}

// Process is one server that may be started and stopped many times. See
// the package documentation.
type Process struct {
	cfg Config
	out *tail

	mu  sync.Mutex
	run *run // the latest start; nil before it and after Stop
}

// run is one start of the binary.
type run struct {
	cmd  *exec.Cmd
	mark int64         // where its output starts in Process.out
	done chan struct{} // closed when the process has exited
	err  error         // cmd.Wait's result, valid once done is closed
}

// exited reports whether the run's process has exited.
func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// New returns a stopped Process for cfg.
func New(cfg Config) *Process {
	if cfg.Name == "" {
		cfg.Name = filepath.Base(cfg.Path)
	}
	if cfg.Ready == nil {
		cfg.Ready = AcceptsTCP
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = defaultReadyTimeout
	}
	cfg.Args = slices.Clone(cfg.Args)
	return &Process{cfg: cfg, out: &tail{}}
}

// Start runs the server and returns once Ready says it answers. When the
// server exits first, or does not answer within ReadyTimeout, Start stops
// it and returns an error that names it and quotes its last output lines;
// the error wraps ErrAddrInUse when the server exited because its address
// was taken. Starting a Process that runs is an error; one that exited by
// itself may be started again.
func (p *Process) Start() error { return p.start("") }

// Restart stops the server if it runs and starts it again with the same
// arguments, marking the restart in its output. See Start.
func (p *Process) Restart() error {
	p.Stop()
	return p.start("--- " + p.String() + ": restart ---\n")
}

// start runs the binary, writing note to its output first.
func (p *Process) start(note string) error {
	p.mu.Lock()
	if p.run != nil && !p.run.exited() {
		p.mu.Unlock()
		return fmt.Errorf("proc: start %s: already running", p)
	}
	r, err := p.launch(note)
	if err != nil {
		p.mu.Unlock()
		return fmt.Errorf("proc: start %s: %w", p, err)
	}
	p.run = r
	p.mu.Unlock()
	if err := p.waitReady(r); err != nil {
		p.stopRun(r)
		return err
	}
	return nil
}

// launch starts the binary; its output goes to p.out and the log file.
// Called with p.mu held.
func (p *Process) launch(note string) (*run, error) {
	var out io.Writer = p.out
	var log *os.File
	if p.cfg.LogFile != "" {
		f, err := os.OpenFile(p.cfg.LogFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		log, out = f, io.MultiWriter(p.out, f)
	}
	if note != "" {
		_, _ = io.WriteString(out, note)
	}
	mark := p.out.mark()
	cmd := exec.Command(p.cfg.Path, p.cfg.Args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		if log != nil {
			_ = log.Close()
		}
		return nil, err
	}
	r := &run{cmd: cmd, mark: mark, done: make(chan struct{})}
	go func() {
		r.err = cmd.Wait()
		if log != nil {
			_ = log.Close()
		}
		close(r.done)
	}()
	return r, nil
}

// waitReady polls the server until it answers, exits, or ReadyTimeout
// passes.
func (p *Process) waitReady(r *run) error {
	deadline := time.Now().Add(p.cfg.ReadyTimeout)
	for {
		err := p.cfg.Ready(p.cfg.Addr)
		if r.exited() { // answered or not, a server that exited is not ready
			return p.exitError(r)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proc: %s did not answer within %v: %v; last output: %s",
				p, p.cfg.ReadyTimeout, err, p.Tail(errorLines))
		}
		select {
		case <-r.done:
			return p.exitError(r)
		case <-time.After(pollInterval):
		}
	}
}

// exitError describes a server that exited before it was ready.
func (p *Process) exitError(r *run) error {
	err := fmt.Errorf("proc: %s exited before it was ready (%v); last output: %s", p, r.err, p.Tail(errorLines))
	if strings.Contains(strings.ToLower(p.out.since(r.mark)), "address already in use") {
		return fmt.Errorf("%w: %w", ErrAddrInUse, err)
	}
	return err
}

// Stop stops the server (see Config.StopGrace) and waits until it has
// exited. It is idempotent.
func (p *Process) Stop() {
	p.mu.Lock()
	r := p.run
	p.run = nil
	p.mu.Unlock()
	if r != nil {
		p.stopRun(r)
	}
}

// stopRun ends r's process and waits for it.
func (p *Process) stopRun(r *run) {
	if r.exited() {
		return
	}
	if p.cfg.StopGrace > 0 {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
			return
		case <-time.After(p.cfg.StopGrace):
		}
	}
	_ = r.cmd.Process.Kill()
	<-r.done
}

// current returns the latest run if its process still runs, or nil.
func (p *Process) current() *run {
	p.mu.Lock()
	r := p.run
	p.mu.Unlock()
	if r == nil || r.exited() {
		return nil
	}
	return r
}

// Running reports whether the server was started and has neither been
// stopped nor exited.
func (p *Process) Running() bool { return p.current() != nil }

// Pid returns the server's process id, or 0 when it does not run.
func (p *Process) Pid() int {
	if r := p.current(); r != nil {
		return r.cmd.Process.Pid
	}
	return 0
}

// Name returns Config.Name.
func (p *Process) Name() string { return p.cfg.Name }

// Addr returns Config.Addr.
func (p *Process) Addr() string { return p.cfg.Addr }

// String returns "NAME on ADDR", or NAME when there is no Addr.
func (p *Process) String() string {
	if p.cfg.Addr == "" {
		return p.cfg.Name
	}
	return p.cfg.Name + " on " + p.cfg.Addr
}

// Command returns the command line: the binary and its arguments.
func (p *Process) Command() string {
	return strings.Join(append([]string{p.cfg.Path}, p.cfg.Args...), " ")
}

// LastOutput returns at most the last n bytes the server printed, across
// restarts (at most 64 KiB are kept), marked "[...]" where cut.
func (p *Process) LastOutput(n int) string { return p.out.last(n) }

// Tail returns the server's last lines of output on one line, joined by
// " | ", for a message; "(none)" when it printed nothing.
func (p *Process) Tail(lines int) string {
	text := strings.TrimSpace(p.out.last(outputLimit))
	if text == "" {
		return "(none)"
	}
	all := strings.Split(text, "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	for i, l := range all {
		all[i] = strings.TrimSpace(l)
	}
	return strings.Join(all, " | ")
}
