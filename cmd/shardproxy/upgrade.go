package main

// Upgrade in place: on SIGUSR2 the running process starts the binary at the
// path it was itself started from (os.Args[0], so a new binary installed
// there is what runs; /proc/self/exe would run the old one again), with the
// same arguments and its listening sockets inherited (file descriptors 4
// and up, named in envListeners). The new process builds its configuration,
// takes those sockets instead of binding, joins the fleet if any, waits
// until it is ready (waitReady), writes the pid file, and writes one byte
// on the link at descriptor 3: only then does the old process stop
// accepting and drain (proxy.Server.Drain, through Shutdown), handing its
// client connections to the new process over the link (handconns.go).
// Both accept from the same sockets until then, so no connection is
// refused. A new process that exits, closes the link or stays silent for
// upgradeTimeout leaves the old one serving (logged).
//
// The sockets are passed by inheritance, not tableflip: tableflip allows one
// Upgrader per process (the tests run the command in-process many times),
// keeps a duplicate of every listener it was ever asked for with no way to
// forget one a reload removes (the port would stay bound until the next
// upgrade), and turns off the unlinking of every unix socket on close.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shardproxy/proxy"
)

// envListeners names the inherited sockets: one "network address" per
// line, in the order of their descriptors from firstListenerFD.
const envListeners = "SHARDPROXY_LISTENERS"

const (
	readyFD         = 3 // the link a new process writes its readiness on (handconns.go)
	firstListenerFD = 4
)

// upgradeTimeout bounds how long the old process waits for the new one to
// be ready: a servers_from pool's first answer and an etcd join fit in it.
const upgradeTimeout = time.Minute

// handover binds the process's listeners (the Listen hook of the proxy and
// the admin servers) and passes them to a new process on upgrade.
type handover struct {
	log *slog.Logger

	mu        sync.Mutex
	inherited map[string]*os.File // "network address" → a socket from the old process, until taken
	link      *net.UnixConn       // to the old process, until ready; nil: none
	pipe      *os.File            // to an old process of an older release, until ready; nil: none
	live      map[*handedListener]struct{}
	passed    bool // a new process has taken the sockets over

	next   *net.UnixConn   // the link to the new process, once ready
	takes  bool            // it takes client connections (linkTakesConns)
	served map[string]bool // the "network address"es it listens on; nil: not said
}

// newHandover returns the process's handover, with the sockets and the
// pipe inherited from an old process when envListeners names them.
func newHandover(log *slog.Logger) *handover {
	h := &handover{log: log, inherited: map[string]*os.File{}, live: map[*handedListener]struct{}{}}
	names, ok := os.LookupEnv(envListeners)
	if !ok {
		return h
	}
	os.Unsetenv(envListeners)
	h.link, h.pipe = inheritLink()
	for i, name := range strings.Split(names, "\n") {
		if name == "" {
			continue
		}
		fd := firstListenerFD + i
		syscall.CloseOnExec(fd)
		h.inherited[name] = os.NewFile(uintptr(fd), name)
	}
	log.Info("upgrading: taking over the listeners of the old process", "listeners", len(h.inherited), "ppid", os.Getppid())
	return h
}

// Listen is the Listen hook: the inherited socket for network and addr, or
// a new one from proxy.Bind.
func (h *handover) Listen(network, addr string) (net.Listener, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := network + " " + addr
	var ln net.Listener
	var err error
	if f := h.inherited[key]; f != nil {
		delete(h.inherited, key)
		ln, err = net.FileListener(f) // a duplicate: f is ours to close
		f.Close()
	} else {
		ln, err = proxy.Bind(network, addr)
	}
	if err != nil {
		return nil, err
	}
	hl := &handedListener{Listener: ln, h: h, key: key}
	h.live[hl] = struct{}{}
	return hl, nil
}

// handedListener is a listener the handover knows of until it is closed.
type handedListener struct {
	net.Listener
	h   *handover
	key string
}

// Close closes the listener. A unix socket's file is removed unless a new
// process has taken the socket over (it serves on that file now).
func (l *handedListener) Close() error {
	l.h.mu.Lock()
	delete(l.h.live, l)
	if ul, ok := l.Listener.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(!l.h.passed)
	}
	l.h.mu.Unlock()
	return l.Listener.Close()
}

// signalReady tells the old process, if any, that this one serves and
// takes its client connections (served on srv): it then stops accepting
// and drains. Inherited sockets the configuration no longer uses are
// closed (a unix socket's file removed).
func (h *handover) signalReady(srv *proxy.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, f := range h.inherited {
		if network, path, _ := strings.Cut(key, " "); network == "unix" {
			os.Remove(path)
		}
		f.Close()
		delete(h.inherited, key)
	}
	var err error
	switch {
	case h.link != nil:
		if _, err = h.link.Write(h.readyMessage()); err == nil {
			go adoptConns(h.link, srv, h.log)
		} else {
			h.link.Close()
		}
	case h.pipe != nil:
		_, err = h.pipe.Write([]byte{linkReady})
		h.pipe.Close()
	default:
		return
	}
	h.link, h.pipe = nil, nil
	if err != nil {
		h.log.Error("cannot tell the old process this one is ready", "err", err)
		return
	}
	h.log.Info("upgrade: ready, the old process drains", "ppid", os.Getppid())
}

// readyMessage is what this process writes on the link when it is ready:
// linkTakesConns, then the "network address" of every listener it has,
// one per line, so that the old process hands over only the connections
// of addresses this one serves. mu is held.
func (h *handover) readyMessage() []byte {
	keys := make([]string, 0, len(h.live))
	for l := range h.live {
		keys = append(keys, l.key)
	}
	slices.Sort(keys)
	return append([]byte{linkTakesConns}, strings.Join(keys, "\n")...)
}

// readReady reads the new process's ready message: whether it takes
// client connections, and the addresses it serves (nil when it did not
// say: all of them).
func readReady(msg []byte) (takes bool, served map[string]bool) {
	if len(msg) == 0 || msg[0] != linkTakesConns {
		return false, nil
	}
	if len(msg) > 1 {
		served = map[string]bool{}
		for _, key := range strings.Split(string(msg[1:]), "\n") {
			served[key] = true
		}
	}
	return true, served
}

// errNotServed refuses the hand-over of a connection whose address the
// new process does not listen on: the drain ends it with the FIN after
// its last reply instead.
var errNotServed = errors.New("the new process does not listen on its address")

// handOff has srv's drain hand its client connections to the new process
// of a successful upgrade, when it takes them: those of the addresses it
// serves.
func (h *handover) handOff(srv *proxy.Server) {
	if h.next == nil || !h.takes {
		return
	}
	next, served := h.next, h.served
	srv.SetHandOff(func(hc proxy.HandedConn) error {
		if served != nil && !served[hc.Network+" "+hc.Addr] {
			return errNotServed
		}
		return passConn(next, hc)
	})
}

// close closes the link to the new process, once the drain is over: it
// then stops waiting for connections.
func (h *handover) close() {
	if h.next != nil {
		h.next.Close()
	}
}

// upgrade starts a new process with the listeners and waits until it is
// ready (true) or has failed (false, logged: this process keeps serving).
func (h *handover) upgrade() bool {
	r, pid, err := h.startNew()
	if err != nil {
		h.log.Error("upgrade failed: the new process did not start; serving on", "err", err)
		return false
	}
	proc, _ := os.FindProcess(pid)
	exited := make(chan error, 1)
	go func() { // reaps it if it fails; if it serves, this process exits first
		st, err := proc.Wait()
		if err == nil {
			err = errors.New(st.String())
		}
		exited <- err
	}()
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, maxHandedMessage)
		if n, _ := r.Read(b); n > 0 {
			got <- b[:n]
		}
		close(got)
	}()
	select {
	case msg, ok := <-got:
		if ok {
			h.next = r
			h.takes, h.served = readReady(msg)
			h.log.Info("upgrade: the new process is ready; draining", "new_pid", pid, "hands_over_connections", h.takes)
			return true
		}
		err = fmt.Errorf("it exited: %v", <-exited)
	case <-time.After(upgradeTimeout):
		proc.Kill()
		err = fmt.Errorf("not ready after %s: killed", upgradeTimeout)
	}
	r.Close()
	h.mu.Lock()
	h.passed = false
	h.mu.Unlock()
	h.log.Error("upgrade failed: serving on", "new_pid", pid, "err", err)
	return false
}

// startNew starts the binary at the path this process was started from,
// with its arguments, stdio and listeners; it returns this process's end
// of the link. The sockets' descriptors are passed as they are, under the
// lock that keeps them open: os.File's Fd would make them blocking under
// this process's accept loops.
func (h *handover) startNew() (link *net.UnixConn, pid int, err error) {
	path, err := exec.LookPath(os.Args[0])
	if err == nil {
		path, err = filepath.Abs(path)
	}
	if err != nil {
		return nil, 0, err
	}
	r, w, err := newLink()
	if err != nil {
		return nil, 0, err
	}
	defer w.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	files := []uintptr{os.Stdin.Fd(), os.Stdout.Fd(), os.Stderr.Fd(), w.Fd()}
	var names []string
	for l := range h.live {
		sc, ok := l.Listener.(syscall.Conn)
		if !ok {
			continue
		}
		raw, err := sc.SyscallConn()
		if err != nil {
			r.Close()
			return nil, 0, err
		}
		raw.Control(func(fd uintptr) { files = append(files, fd) })
		names = append(names, l.key)
	}
	env := append(os.Environ(), envListeners+"="+strings.Join(names, "\n"))
	pid, err = syscall.ForkExec(path, append([]string{path}, os.Args[1:]...),
		&syscall.ProcAttr{Env: env, Files: files})
	if err != nil {
		r.Close()
		return nil, 0, fmt.Errorf("start %s: %w", path, err)
	}
	h.passed = true // from here on a closed unix listener keeps its file
	h.log.Info("upgrade: new process started", "path", path, "new_pid", pid, "listeners", len(names))
	return r, pid, nil
}

// waitReady waits until srv is ready, as GET /ready would say (every
// pool's first servers tried, or proxy.Options.ReadyWait passed), before
// the process tells an old process or systemd that it serves; a drain
// asked for meanwhile (POST /drain) ends the wait.
func waitReady(srv *proxy.Server) {
	for ok, _ := srv.Ready(); !ok && !srv.Draining(); ok, _ = srv.Ready() {
		time.Sleep(10 * time.Millisecond)
	}
}

// ownsPidFile reports whether path holds this process's id: after an
// upgrade it holds the new process's, which the old one must not remove.
func ownsPidFile(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid())
}
