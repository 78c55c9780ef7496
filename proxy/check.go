package proxy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"shardproxy/config"
)

// Check runs on cfg every check New, Start and a reload run, short of
// binding listeners and dialing servers: each pool is built as New builds
// it (TLS files read, route files compiled and their config stage run,
// distributions and cluster settings checked) and closed again; then each
// listen address is resolved, and a unix socket's directory must exist.
// A configuration that passes can still fail to start where only binding
// tells: a port in use, an address of another host. shardproxy -t runs
// it.
func Check(cfg *config.Config, opts Options) error {
	b := &builder{s: newServer(opts), check: true}
	gen, err := b.build(cfg)
	if err != nil {
		return err
	}
	abort(gen)
	for _, pc := range cfg.Pools {
		if pc.Listen == (config.Listen{}) {
			continue
		}
		if err := checkListen(pc.Listen); err != nil {
			return fmt.Errorf("proxy: pool %q: listen %s: %w", pc.Name, pc.Listen.Addr, err)
		}
	}
	return nil
}

// checkListen checks what listen needs of an address before it binds.
func checkListen(l config.Listen) error {
	if l.Network == "unix" {
		dir := filepath.Dir(l.Addr)
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	_, err := net.ResolveTCPAddr("tcp", l.Addr)
	return err
}
