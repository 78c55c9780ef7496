package proxy_test

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestRedisPubSubLoad: publishers and subscribers (RESP2 and RESP3) on
// every server of a real 3-server pool at once. Every message arrives
// exactly once, in its publisher's order; the RESP3 subscribers send
// GETs all along, whose replies come whole, in order, between the
// pushes. Then a server is killed under the load: its subscribers get
// the error and are closed, the others keep receiving every message, and
// the gauges go back to 0 when all leave.
func TestRedisPubSubLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs real redis-server")
	}
	servers, yaml := redisPool(t, 3, "  blocking_connections: 32\n")
	srv, addr := startProxy(t, yaml, "rd")
	where := redisPlacement(t, addrsOf(servers), "")
	stat := func(name string) int64 { return routerStat(t, srv, "rd", name) }
	chans := keyEach(where, servers, "load")               // chans[i] on servers[i]
	kload := keysOn(where, servers[1].Addr, "kload", 1)[0] // on a server that lives
	respDial(t, addr).do("SET", kload, "value")
	const (
		publishers = 3
		before     = 300 // messages per publisher and channel before the kill
		after      = 300 // and after it starts
	)

	// Subscribers: doomed ones hold every channel (one on the server
	// that dies), survivors the other two.
	type subscriber struct {
		c        *respClient
		resp3    bool
		doomed   bool
		last     map[string]int // "publisher/channel" -> last seq
		got      atomic.Int64
		gets     atomic.Int64 // GET replies read
		sent     atomic.Int64 // GETs sent
		lostErr  atomic.Bool  // the server-lost error came
		closedAt time.Time    // the reader's, until finished
		finished chan struct{}
	}
	var subs []*subscriber
	for i := range 8 {
		s := &subscriber{c: respDial(t, addr), resp3: i%2 == 1, doomed: i < 4, last: map[string]int{}, finished: make(chan struct{})}
		if s.resp3 {
			hello3(t, s.c)
		}
		held := chans
		if !s.doomed {
			held = chans[1:]
		}
		s.c.send(multibulk(append([]string{"SUBSCRIBE"}, held...)...))
		s.c.readN(len(held))
		subs = append(subs, s)
	}
	if got := stat("subscriptions"); got != 4*3+4*2 {
		t.Fatalf("subscriptions %d, want 20", got)
	}

	stop := make(chan struct{})
	var leaving atomic.Bool
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Add(1)
		go func() { // reader
			defer wg.Done()
			defer close(s.finished)
			s.c.nc.SetReadDeadline(time.Now().Add(time.Minute))
			for {
				r, err := readRESP(s.c.r)
				if err != nil {
					s.closedAt = time.Now()
					if !s.doomed && !leaving.Load() {
						t.Errorf("survivor: read: %v", err)
					}
					return
				}
				switch {
				case strings.HasPrefix(r, "-ERR pub/sub connection to server "+servers[0].Addr+" lost"):
					s.lostErr.Store(true)
				case s.resp3 && r[0] != '>':
					if r != bulk("value") {
						t.Errorf("GET between pushes: %q", r)
						return
					}
					s.gets.Add(1)
				case !s.resp3 && r[0] != '*', s.resp3 && r[0] != '>':
					t.Errorf("not a message: %q", r)
					return
				default:
					f := strings.Split(r, "\r\n") // header, $7, message, $n, channel, $m, payload
					if len(f) != 8 || f[2] != "message" {
						t.Errorf("not a message: %q", r)
						return
					}
					p := strings.Split(f[6], ":") // publisher:channel:seq
					seq, _ := strconv.Atoi(p[2])
					k := p[0] + "/" + f[4]
					if p[1] != f[4] || seq != s.last[k]+1 {
						t.Errorf("message %q after seq %d of %s: lost, twice or out of order", f[6], s.last[k], k)
						return
					}
					s.last[k] = seq
					s.got.Add(1)
				}
			}
		}()
		if s.resp3 {
			wg.Add(1)
			go func() { // GETs all along
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					case <-s.finished:
						return
					default:
					}
					s.c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
					if _, err := io.WriteString(s.c.nc, multibulk("GET", kload)); err != nil {
						return
					}
					s.sent.Add(1)
					time.Sleep(time.Millisecond)
				}
			}()
		}
	}

	var published [publishers][3]atomic.Int64 // successful PUBLISHes
	publish := func(from, to int) {
		var pw sync.WaitGroup
		for p := range publishers {
			pw.Add(1)
			go func() {
				defer pw.Done()
				c := respDial(t, addr)
				for seq := from; seq <= to; seq++ {
					for _, ch := range chans {
						c.send(multibulk("PUBLISH", ch, fmt.Sprintf("p%d:%s:%d", p, ch, seq)))
					}
					for i := range chans {
						r, err := c.tryReply()
						if err != nil {
							t.Errorf("PUBLISH: %v", err)
							return
						}
						if r[0] == ':' {
							published[p][i].Add(1)
						}
					}
				}
			}()
		}
		pw.Wait()
	}
	start := time.Now()
	publish(1, before)
	want := func(s *subscriber) int64 {
		if s.doomed {
			return publishers * 3 * before
		}
		return publishers * 2 * before
	}
	waitFor(t, 30*time.Second, "every message before the kill", func() bool {
		for _, s := range subs {
			if s.got.Load() != want(s) {
				return false
			}
		}
		return true
	})
	elapsed := time.Since(start)
	var total int64
	for _, s := range subs {
		total += s.got.Load()
	}
	t.Logf("phase 1: %d messages published, %d delivered in %v (%.0f/s delivered)",
		publishers*3*before, total, elapsed, float64(total)/elapsed.Seconds())

	// Phase 2: the same load, and server 0 killed a third of the way.
	killed := make(chan time.Time, 1)
	go func() {
		for published[0][1].Load() < before+after/3 {
			time.Sleep(time.Millisecond)
		}
		killed <- time.Now()
		syscall.Kill(servers[0].Pid(), syscall.SIGKILL)
	}()
	publish(before+1, before+after)
	killAt := <-killed
	var slowest time.Duration
	for _, s := range subs {
		if !s.doomed {
			continue
		}
		select {
		case <-s.finished:
		case <-time.After(5 * time.Second):
			t.Fatalf("a subscriber of the dead server was not closed")
		}
		if !s.lostErr.Load() {
			t.Errorf("a subscriber of the dead server closed without the error")
		}
		slowest = max(slowest, s.closedAt.Sub(killAt))
	}
	t.Logf("the dead server's 4 subscribers told and closed within %v of the kill", slowest.Round(time.Microsecond))
	for _, s := range subs {
		if s.doomed {
			continue
		}
		waitFor(t, 30*time.Second, "survivors get every message", func() bool {
			var n int64
			for p := range publishers {
				n += published[p][1].Load() + published[p][2].Load()
			}
			return s.got.Load() == n
		})
	}
	for p := range publishers {
		if published[p][1].Load() != before+after || published[p][0].Load() >= before+after {
			t.Errorf("publisher %d: %d on the live server, %d on the dead one", p, published[p][1].Load(), published[p][0].Load())
		}
	}
	close(stop)
	for _, s := range subs {
		if s.resp3 && !s.doomed {
			waitFor(t, 10*time.Second, "every GET answered", func() bool { return s.gets.Load() == s.sent.Load() })
			t.Logf("a RESP3 survivor: %d messages, %d GET replies between them", s.got.Load(), s.gets.Load())
		}
	}
	waitFor(t, 5*time.Second, "survivors still counted", func() bool {
		return stat("subscribed_clients") == 4 && stat("subscriptions") == 8 && stat("subscribers_dropped") == 4
	})
	leaving.Store(true)
	for _, s := range subs {
		s.c.nc.Close()
	}
	wg.Wait()
	waitFor(t, 5*time.Second, "gauges back to 0", func() bool { return subsGone(stat) })
}
