package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"shardproxy/config"
)

// ErrNoConfig is returned when the fleet's prefix holds no configuration.
var ErrNoConfig = errors.New("fleet: no configuration in etcd (publish one with shardproxy fleet put)")

// Source names a configuration version in logs and errors: "etcd:P/config@REV".
func Source(prefix string, revision int64) string {
	return fmt.Sprintf("etcd:%s/config@%d", prefix, revision)
}

// Parse parses a configuration version read from etcd. A configuration in
// etcd may not hold a fleet: section: where the fleet is comes from each
// proxy's flags or file, never from the fleet itself. Relative paths in it
// (route files, TLS files) resolve against the proxy's working directory.
func Parse(data []byte, prefix string, revision int64) (*config.Config, error) {
	source := Source(prefix, revision)
	cfg, err := config.Parse(data, source)
	if err != nil {
		return nil, err
	}
	if cfg.Dir, err = os.Getwd(); err != nil {
		return nil, fmt.Errorf("fleet: %s: working directory: %w", source, err)
	}
	if cfg.Fleet != nil {
		return nil, &config.Error{Source: source, Pool: config.FleetSection,
			Msg: "a configuration in etcd may not hold a fleet: section"}
	}
	return cfg, nil
}

// applyVersion parses and applies the version at revision, unless it was
// handled already (force: even then). A version that fails is refused:
// logged with its revision, counted, shown; the running one keeps serving.
func (a *Agent) applyVersion(data []byte, revision int64, force bool) error {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if revision == a.cfg.seen && !force {
		return nil
	}
	a.cfg.seen = revision
	cfg, err := Parse(data, a.o.Prefix, revision)
	if err != nil {
		a.o.Target.Refuse(Source(a.o.Prefix, revision), err)
	} else {
		var sum string
		if sum, err = a.o.Target.Apply(cfg); err == nil {
			a.cfg.revision, a.cfg.checksum = revision, sum
			a.log.Info("fleet configuration applied", "revision", revision, "checksum", sum)
			a.setState(func(s *State) { s.ConfigRevision, s.ConfigChecksum = revision, sum })
			return nil
		}
	}
	a.log.Error("fleet configuration refused, the running one kept", "revision", revision, "err", err)
	a.setState(func(s *State) {
		s.Refused++
		s.LastError = err.Error()
	})
	return err
}

// Reread reads the configuration etcd holds now and applies it, even if
// it is the version already running (SIGHUP and POST /reload with a
// fleet). It returns the revision read.
func (a *Agent) Reread(ctx context.Context) (int64, error) {
	cli := a.shared.Load()
	if cli == nil {
		return 0, errors.New("fleet: etcd not reached yet")
	}
	data, rev, err := Get(ctx, cli, a.o.Prefix, a.o.RequestTimeout)
	if err != nil {
		a.setState(func(s *State) { s.Errors++; s.LastError = err.Error() })
		return 0, err
	}
	err = a.applyVersion(data, rev, true)
	select { // the registration shows the new version
	case a.healthSig <- struct{}{}:
	default:
	}
	return rev, err
}

// Get reads the configuration under prefix: its bytes and revision.
func Get(ctx context.Context, cli *clientv3.Client, prefix string, timeout time.Duration) ([]byte, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := cli.Get(rctx, prefix+"/config")
	if err != nil {
		return nil, 0, fmt.Errorf("fleet: read %s/config: %w", prefix, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrNoConfig
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

// Load reads and parses the configuration under prefix, retrying until
// etcd answers with one or ctx ends: a proxy without a local file waits
// for it so. A version that fails to parse is returned as an error at once.
func Load(ctx context.Context, c Conn, prefix string) (*config.Config, int64, error) {
	wait := 200 * time.Millisecond
	for {
		data, rev, err := dialGet(ctx, c, prefix)
		if err == nil {
			cfg, err := Parse(data, prefix, rev)
			return cfg, rev, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%w (gave up waiting: %v)", err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// dialGet reads the configuration with a client of its own: with a user
// and password, making the client already needs etcd.
func dialGet(ctx context.Context, c Conn, prefix string) ([]byte, int64, error) {
	cli, err := Dial(c)
	if err != nil {
		return nil, 0, err
	}
	defer cli.Close()
	return Get(ctx, cli, prefix, 3*time.Second)
}

// Put publishes data as the fleet's configuration and returns its
// revision. The caller validates it first (as -t does).
func Put(ctx context.Context, cli *clientv3.Client, prefix string, data []byte) (int64, error) {
	if _, err := Parse(data, prefix, 0); err != nil {
		return 0, err
	}
	resp, err := cli.Put(ctx, prefix+"/config", string(data))
	if err != nil {
		return 0, fmt.Errorf("fleet: write %s/config: %w", prefix, err)
	}
	return resp.Header.Revision, nil
}
