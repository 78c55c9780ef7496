package main

// The client connections of an upgrade. The old process and the new one
// share a unix socket pair (SOCK_SEQPACKET) at the new process's
// descriptor 3 (readyFD). The new process writes one message on it when
// it is ready: linkTakesConns says it also takes client connections, and
// the lines after it name the addresses it listens on (readyMessage). The
// old process's drain then sends each client connection it can hand over
// (proxy.Server.SetHandOff) as one message: the listener's "network
// address" and the session's state, with the socket's descriptor
// (SCM_RIGHTS); a connection of an address the new process does not
// listen on ends as any drain ends it, after its last reply. The new process serves each on its listener at that
// address (proxy.Server.Adopt) until the old process closes its end. The
// clients see no close: what they sent after their last reply waits in
// the socket for the new process.
//
// A new process of an older release writes linkReady: the old one then
// drains as a shutdown does. A new process started by an older release
// finds a pipe at descriptor 3, and writes linkReady on it.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"shardproxy/proxy"
)

// What the new process writes on the link when it is ready.
const (
	linkReady      = 1 // ready
	linkTakesConns = 2 // ready, and takes client connections
)

// maxHandedMessage bounds one connection's message: its listener's address
// and its session's state (a Redis client's name is the longest part).
const maxHandedMessage = 64 << 10

// passTimeout bounds how long the old process waits to send one
// connection: a new process that stops reading does not hold a session.
const passTimeout = 5 * time.Second

// newLink returns the two ends of a new process's link: ours as a
// connection, the new process's as a file to pass at readyFD.
func newLink() (ours *net.UnixConn, theirs *os.File, err error) {
	// Close-on-exec set under ForkLock, as the net package does where
	// socketpair(2) takes no SOCK_CLOEXEC (the BSDs and macOS).
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "upgrade-link")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "upgrade-link"), nil
}

// inheritLink takes the link an old process left at readyFD: a socket
// pair's end, or the pipe of an older release (conn nil).
func inheritLink() (conn *net.UnixConn, pipe *os.File) {
	syscall.CloseOnExec(readyFD)
	f := os.NewFile(readyFD, "upgrade-link")
	if c, err := net.FileConn(f); err == nil {
		if uc, ok := c.(*net.UnixConn); ok {
			f.Close()
			return uc, nil
		}
		c.Close()
	}
	return nil, f
}

// passConn sends hc's socket and state to the new process over link.
func passConn(link *net.UnixConn, hc proxy.HandedConn) error {
	sc, ok := hc.Conn.(syscall.Conn)
	if !ok {
		return errors.New("no socket to pass")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	key := hc.Network + " " + hc.Addr
	msg := binary.AppendUvarint(nil, uint64(len(key)))
	msg = append(append(msg, key...), hc.State...)
	if len(msg) > maxHandedMessage {
		return fmt.Errorf("a message of %d bytes", len(msg))
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		link.SetWriteDeadline(time.Now().Add(passTimeout))
		_, _, serr = link.WriteMsgUnix(msg, syscall.UnixRights(int(fd)), nil)
	})
	if err == nil {
		err = serr
	}
	return err
}

// adoptConns serves the client connections the old process sends over
// link on srv, until the old process closes its end.
func adoptConns(link *net.UnixConn, srv *proxy.Server, log *slog.Logger) {
	defer link.Close()
	msg := make([]byte, maxHandedMessage)
	oob := make([]byte, syscall.CmsgSpace(4*4))
	adopted, refused := 0, 0
	for {
		n, oobn, _, _, err := link.ReadMsgUnix(msg, oob)
		if err != nil || n == 0 {
			log.Info("upgrade: the old process has handed over its connections", "adopted", adopted, "refused", refused)
			return
		}
		if err := adoptOne(srv, msg[:n], oob[:oobn]); err != nil {
			refused++
			log.Warn("upgrade: a connection handed over is closed", "err", err)
			continue
		}
		adopted++
	}
}

// adoptOne serves the connection of one message on srv; on error it is
// closed.
func adoptOne(srv *proxy.Server, msg, oob []byte) error {
	var fds []int
	if cms, err := syscall.ParseSocketControlMessage(oob); err == nil {
		for i := range cms {
			got, _ := syscall.ParseUnixRights(&cms[i])
			fds = append(fds, got...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			syscall.Close(fd)
		}
		return fmt.Errorf("a message with %d sockets", len(fds))
	}
	f := os.NewFile(uintptr(fds[0]), "handed")
	nc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return err
	}
	n, k := binary.Uvarint(msg)
	if k <= 0 || uint64(len(msg)-k) < n {
		nc.Close()
		return errors.New("an unreadable message")
	}
	network, addr, _ := strings.Cut(string(msg[k:k+int(n)]), " ")
	if err := srv.Adopt(network, addr, nc, msg[k+int(n):]); err != nil {
		nc.Close()
		return err
	}
	return nil
}
