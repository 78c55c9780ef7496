package backend_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"shardproxy/backend"
	"shardproxy/codec"
	"shardproxy/internal/testserver"
)

// replayer sends its requests on each new socket, and fails while fail
// is set.
type replayer struct {
	mu    sync.Mutex
	reqs  []*codec.Request
	fail  bool
	kinds [][]codec.ReplyKind
}

func (r *replayer) Replay(name string, send func([]*codec.Request) ([]codec.ReplyKind, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("not yet")
	}
	kinds, err := send(r.reqs)
	r.kinds = append(r.kinds, kinds)
	return err
}

// TestReplay: a new socket sends Config.Replay's requests after its
// handshake and before the first call, and a failed replay fails the
// calls waiting for the socket with CauseReplay.
func TestReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real memcached")
	}
	mcd := testserver.StartMemcached(t)
	rp := &replayer{reqs: []*codec.Request{request(t, "delete k\r\n"), request(t, "delete absent\r\n")}, fail: true}
	b := backend.New(backend.Config{Addr: mcd.Addr, Dialect: mc, Timeout: time.Second, Replay: rp})
	t.Cleanup(b.Close)
	if got := sendAll(t, b, "set k 0 0 1\r\nv\r\n"); causeOf(got[0]) != "replay" {
		t.Fatalf("set with a failing replay: %q %v, want cause replay", got[0].Raw, got[0].Err)
	}
	d := backend.New(backend.Config{Addr: mcd.Addr, Dialect: mc})
	t.Cleanup(d.Close)
	if got := sendAll(t, d, "set k 0 0 1\r\nv\r\n"); string(got[0].Raw) != "STORED\r\n" {
		t.Fatalf("set directly: %q %v", got[0].Raw, got[0].Err)
	}
	rp.mu.Lock()
	rp.fail = false
	rp.mu.Unlock()
	got := sendAll(t, b, "get k\r\n")
	if string(got[0].Raw) != "END\r\n" {
		t.Fatalf("get after the replay: %q %v, want a miss: the delete went first", got[0].Raw, got[0].Err)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if len(rp.kinds) != 1 || len(rp.kinds[0]) != 2 || rp.kinds[0][0] != codec.ReplyOK || rp.kinds[0][1] != codec.ReplyMiss {
		t.Errorf("replay replies %v, want [[ok miss]]", rp.kinds)
	}
}
