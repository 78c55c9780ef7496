package main

import (
	"net"
	"os"
	"strconv"
)

// notifyReady tells the service manager, when it asked (systemd's
// Type=notify sets NOTIFY_SOCKET), that this process serves and is the
// service's main process: after an upgrade the main process id changes,
// which systemd accepts from any process of the service with
// NotifyAccess=all (packaging/shardproxy.service). Without NOTIFY_SOCKET
// it does nothing; a failure is returned for the log.
func notifyReady() error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' { // an abstract socket
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("READY=1\nMAINPID=" + strconv.Itoa(os.Getpid()) + "\n"))
	return err
}
