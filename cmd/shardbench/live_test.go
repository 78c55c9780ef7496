package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// servers starts one real memcached and one redis-server and returns the
// address for each protocol.
func servers(t *testing.T) map[string]*testserver.Server {
	t.Helper()
	mc := testserver.StartMemcached(t)
	rd := testserver.StartRedis(t)
	return map[string]*testserver.Server{"text": mc, "meta": mc, "resp": rd}
}

// TestProtocolsAgainstServers runs each encoder against a real server and
// reads the replies with the matching decoder.
func TestProtocolsAgainstServers(t *testing.T) {
	for proto, srv := range servers(t) {
		t.Run(proto, func(t *testing.T) {
			conn, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			r := bufio.NewReader(conn)
			p := protocols[proto]()
			ks := newKeyspace("live-"+proto+":", 10, 300)

			var out []byte
			for _, k := range []int{1, 3} {
				out = p.appendSetHead(out, ks.names[k], ks.size)
				out = ks.appendValue(out, k, ks.nextVersion(k))
				out = append(out, "\r\n"...)
			}
			single := [][]byte{ks.names[1]}
			multi := [][]byte{ks.names[1], ks.names[2], ks.names[3]} // 2 was never set
			out = p.appendGet(out, single)
			out = p.appendGet(out, multi)
			out = p.appendGet(out, [][]byte{ks.names[2]})
			if _, err := conn.Write(out); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if err := p.readSet(r); err != nil {
					t.Fatalf("set %d: %v", i, err)
				}
			}
			wantHits := []string{"0:1", "0:1 2:3", ""}
			for i, keys := range [][][]byte{single, multi, {ks.names[2]}} {
				var hits []string
				err := p.readGet(r, keys, func(pos int, v []byte) {
					k, _ := ks.index(keys[pos])
					if err := ks.check(k, v); err != nil {
						t.Errorf("get %d: %v", i, err)
					}
					hits = append(hits, fmt.Sprintf("%d:%d", pos, k))
				})
				if err != nil {
					t.Fatalf("get %d: %v", i, err)
				}
				if got := strings.Join(hits, " "); got != wantHits[i] {
					t.Errorf("get %d: hits %q, want %q", i, got, wantHits[i])
				}
			}
		})
	}
}

// runJSON runs the command with -json and returns its exit status and
// result.
func runJSON(t *testing.T, args ...string) (int, *result, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append(args, "-json"), &stdout, &stderr)
	var res result
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("output is not JSON: %v\n%s", err, stdout.String())
		}
	}
	return code, &res, stderr.String()
}

// TestRunAgainstServers runs whole benchmarks against real servers: every
// reply must check out.
func TestRunAgainstServers(t *testing.T) {
	srvs := servers(t)
	tests := []struct {
		proto string
		args  []string
	}{
		{"text", []string{"-pipeline", "1"}},
		{"text", []string{"-pipeline", "8", "-mget", "10"}},
		{"text", []string{"-pipeline", "4", "-dist", "zipf", "-value", "5000"}},
		{"meta", []string{"-pipeline", "1"}},
		{"meta", []string{"-pipeline", "8", "-mget", "10", "-ratio", "1:1"}},
		{"resp", []string{"-pipeline", "1"}},
		{"resp", []string{"-pipeline", "8", "-mget", "10", "-dist", "zipf"}},
		{"resp", []string{"-pipeline", "2", "-value", "100000", "-keys", "20"}},
		// 32 sets of 200 KB a batch: more than the socket takes at once,
		// so send finishes the batch through net.Conn.
		{"text", []string{"-pipeline", "32", "-value", "200000", "-keys", "40", "-ratio", "1:0"}},
	}
	for _, tt := range tests {
		srv := srvs[tt.proto]
		t.Run(tt.proto+strings.Join(tt.args, ""), func(t *testing.T) {
			args := append([]string{"-addr", srv.Addr, "-proto", tt.proto, "-conns", "4", "-keys", "200",
				"-requests", "2000", "-warmup", "50ms", "-server-pid", strconv.Itoa(srv.Pid())}, tt.args...)
			before := commandsProcessed(t, tt.proto, srv.Addr)
			code, res, stderr := runJSON(t, args...)
			if code != exitOK || res.Errors != 0 {
				t.Fatalf("exit %d, %d errors: %v\n%s", code, res.Errors, res.ErrorSamples, stderr)
			}
			// The server counts the commands it ran; the first INFO is
			// one of them.
			if after := commandsProcessed(t, tt.proto, srv.Addr); before >= 0 && after-before-1 != res.Answered {
				t.Errorf("redis-server ran %d commands, shardbench counts %d answered", after-before-1, res.Answered)
			}
			if prefill := int64(res.Config.Keys); res.Answered < prefill+res.Requests { // and the warm-up
				t.Errorf("%d answered, fewer than the prefill's %d and %d measured", res.Answered, prefill, res.Requests)
			}
			if res.Requests != 2000 || res.Sets+res.Gets != 2000 {
				t.Errorf("requests %d (sets %d, gets %d), want 2000", res.Requests, res.Sets, res.Gets)
			}
			if res.Hits != res.KeysRead || res.Misses != 0 {
				t.Errorf("after prefill: %d hits, %d misses of %d keys read", res.Hits, res.Misses, res.KeysRead)
			}
			l := res.LatencyUS
			if !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max) || res.OpsPerSec <= 0 {
				t.Errorf("implausible figures: %+v, %.0f ops/s", l, res.OpsPerSec)
			}
			if len(res.Servers) != 1 || res.Servers[0].Error != "" || res.Servers[0].CPUS < 0 {
				t.Errorf("server usage %+v", res.Servers)
			}
		})
	}
}

// commandsProcessed returns redis-server's count of the commands it has
// run, or -1 for a server of another protocol.
func commandsProcessed(t *testing.T, proto, addr string) int64 {
	t.Helper()
	if proto != "resp" {
		return -1
	}
	info, err := testserver.RedisDo(addr, "INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no total_commands_processed: %q", info)
	return 0
}

// TestRunWithoutPrefill lets misses happen: they are right until a set of the
// key is acknowledged.
func TestRunWithoutPrefill(t *testing.T) {
	srv := testserver.StartMemcached(t)
	code, res, stderr := runJSON(t, "-addr", srv.Addr, "-conns", "3", "-keys", "5000",
		"-requests", "3000", "-warmup", "0", "-prefill=false")
	if code != exitOK || res.Errors != 0 {
		t.Fatalf("exit %d, %d errors: %v\n%s", code, res.Errors, res.ErrorSamples, stderr)
	}
	if res.Misses == 0 {
		t.Errorf("no misses over 5000 keys without prefill")
	}
}

// TestRunPaced paces a run and checks that it holds the rate and reports
// how late the generator itself started batches, in JSON and text; an
// unpaced run reports no pacing.
func TestRunPaced(t *testing.T) {
	srv := testserver.StartMemcached(t)
	code, res, stderr := runJSON(t, "-addr", srv.Addr, "-conns", "4", "-keys", "200", "-rate", "2000",
		"-duration", "500ms", "-warmup", "50ms")
	if code != exitOK || res.Errors != 0 {
		t.Fatalf("exit %d, %d errors: %v\n%s", code, res.Errors, res.ErrorSamples, stderr)
	}
	if res.OpsPerSec < 1500 || res.OpsPerSec > 2500 {
		t.Errorf("paced at 2000 req/s, ran %.0f", res.OpsPerSec)
	}
	l := res.PacingLateUS
	if l == nil || !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("pacing lateness %+v", l)
	}
	_, unpaced, _ := runJSON(t, "-addr", srv.Addr, "-conns", "2", "-keys", "200", "-requests", "100", "-warmup", "0")
	if unpaced.PacingLateUS != nil {
		t.Errorf("an unpaced run reports pacing lateness %+v", unpaced.PacingLateUS)
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"-addr", srv.Addr, "-conns", "2", "-keys", "200", "-rate", "1000",
		"-duration", "200ms", "-warmup", "0"}, &stdout, io.Discard); code != exitOK {
		t.Fatalf("text run: exit %d", code)
	}
	if !strings.Contains(stdout.String(), "pacing     started late p50") {
		t.Errorf("paced text output lacks the pacing line:\n%s", stdout.String())
	}
}

func TestRunTextOutput(t *testing.T) {
	srv := testserver.StartMemcached(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-addr", srv.Addr, "-conns", "2", "-duration", "200ms",
		"-warmup", "50ms"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, want := range []string{"req/s", "p99", "0 wrong replies"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestRunCatchesWrongReplies runs against a memcached look-alike that lies in
// one way each: every lie must be counted and make the exit status 1.
func TestRunCatchesWrongReplies(t *testing.T) {
	tests := []struct {
		name string
		lie  func(key string, value []byte, store map[string][]byte) (string, []byte, bool)
		want string
	}{
		{"another key's value", func(key string, v []byte, store map[string][]byte) (string, []byte, bool) {
			other := key[:len(key)-1] + string('0'+(key[len(key)-1]-'0'+1)%10)
			if ov, ok := store[other]; ok {
				return key, ov, true
			}
			return key, v, true
		}, "got the value of key"},
		{"corrupt byte", func(key string, v []byte, _ map[string][]byte) (string, []byte, bool) {
			c := append([]byte(nil), v...)
			c[len(c)-1] ^= 1
			return key, c, true
		}, "differs at byte"},
		{"truncated value", func(key string, v []byte, _ map[string][]byte) (string, []byte, bool) {
			return key, v[:len(v)-1], true
		}, "want 100"},
		{"lost key", func(key string, v []byte, _ map[string][]byte) (string, []byte, bool) {
			return key, v, false
		}, "miss after an acknowledged set"},
		{"renamed key", func(key string, v []byte, _ map[string][]byte) (string, []byte, bool) {
			return key + "x", v, true
		}, "key not asked for"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := fakeMemcached(t, tt.lie)
			code, res, _ := runJSON(t, "-addr", addr, "-conns", "2", "-keys", "50", "-requests", "500",
				"-warmup", "0", "-mget", "3")
			if code != exitWrong || res.Errors == 0 {
				t.Fatalf("exit %d with %d errors, want 1 and errors", code, res.Errors)
			}
			if len(res.ErrorSamples) == 0 || !strings.Contains(strings.Join(res.ErrorSamples, "\n"), tt.want) {
				t.Errorf("samples %q, want one containing %q", res.ErrorSamples, tt.want)
			}
		})
	}
}

// fakeMemcached serves set and get of memcached's text protocol on a free
// port, passing every value found through lie, which may change the key or
// value or hide it (ok false).
func fakeMemcached(t *testing.T, lie func(key string, value []byte, store map[string][]byte) (string, []byte, bool)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		store = map[string][]byte{}
		wg    sync.WaitGroup
	)
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	serve := func(conn net.Conn) {
		defer conn.Close()
		r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 5 && f[0] == "set":
				n, _ := strconv.Atoi(f[4])
				data := make([]byte, n+2)
				if _, err := io.ReadFull(r, data); err != nil {
					return
				}
				mu.Lock()
				store[f[1]] = data[:n]
				mu.Unlock()
				w.WriteString("STORED\r\n")
			case len(f) >= 2 && f[0] == "get":
				mu.Lock()
				for _, key := range f[1:] {
					if v, ok := store[key]; ok {
						if k2, v2, ok := lie(key, v, store); ok {
							fmt.Fprintf(w, "VALUE %s 0 %d\r\n%s\r\n", k2, len(v2), v2)
						}
					}
				}
				mu.Unlock()
				w.WriteString("END\r\n")
			default:
				w.WriteString("ERROR\r\n")
			}
			if r.Buffered() == 0 {
				if err := w.Flush(); err != nil {
					return
				}
			}
		}
	}
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serve(conn) })
		}
	})
	return l.Addr().String()
}
