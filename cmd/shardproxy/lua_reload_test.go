package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// v2Routes is a V2 route file that writes to both servers and reads from
// the one named by READ (1 or 2).
const v2Routes = `
function mcp_config_pools()
  return {
    one = mcp.pool({ mcp.backend("one", "127.0.0.1", %d) }),
    two = mcp.pool({ mcp.backend("two", "127.0.0.1", %d) }),
  }
end

function mcp_config_routes(p)
  local fg = mcp.funcgen_new()
  local h1 = fg:new_handle(p.one)
  local h2 = fg:new_handle(p.two)
  local read = %d == 1 and h1 or h2
  fg:ready{ n = "rw", f = function(rctx)
    return function(r)
      local cmd = r:command()
      if cmd == mcp.CMD_SET or cmd == mcp.CMD_DELETE then
        rctx:enqueue(r, { h1, h2 })
        rctx:wait_cond(2, mcp.WAIT_ANY)
        return rctx:res_any(h1)
      end
      return rctx:enqueue_and_wait(r, read)
    end
  end }
  mcp.attach(mcp.CMD_ANY_STORAGE, fg)
end
`

// TestLuaReloadBySIGHUP runs the binary with a V2 route file and reloads
// it by SIGHUP while clients write and read back their own keys: every
// reload takes effect (a key stored differently on each server shows
// which one reads answer from) and no request fails or reads a wrong
// value; a broken file is refused and the running routes keep serving.
func TestLuaReloadBySIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary and runs memcached")
	}
	bin := testserver.Shardproxy(t)
	one, two := testserver.StartMemcached(t), testserver.StartMemcached(t)
	dir := t.TempDir()
	routes := filepath.Join(dir, "routes.lua")
	writeRoutes := func(src string) {
		t.Helper()
		if err := os.WriteFile(routes, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRoutes(fmt.Sprintf(v2Routes, one.Port, two.Port, 1))
	listen := loopback(t)
	conf := filepath.Join(dir, "conf.yml")
	if err := os.WriteFile(conf, []byte("v2:\n  listen: "+listen+"\n  lua: routes.lua\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd, logs, fail := startProxy(t, bin, "-c", conf, "-s", "0", "--admin", "")
	waitFor(t, fail, "the Lua pool", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	// The marker key holds a different value on each server.
	storeDirect(t, fail, one.Addr, "marker", "one")
	storeDirect(t, fail, two.Addr, "marker", "two")

	var stop atomic.Bool
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("tcp", listen)
			if err != nil {
				firstErr.CompareAndSwap(nil, err.Error())
				failed.Add(1)
				return
			}
			defer nc.Close()
			r := bufio.NewReader(nc)
			for i := 0; !stop.Load(); i++ {
				key, val := fmt.Sprintf("w%d-%d", w, i), fmt.Sprintf("v%d", i)
				nc.SetDeadline(time.Now().Add(10 * time.Second))
				fmt.Fprintf(nc, "set %s 0 0 %d\r\n%s\r\nget %s\r\n", key, len(val), val, key)
				want := "STORED\r\nVALUE " + key + " 0 " + fmt.Sprint(len(val)) + "\r\n" + val + "\r\nEND\r\n"
				got := make([]byte, len(want))
				if _, err := io.ReadFull(r, got); err != nil || string(got) != want {
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: got %q (%v), want %q", key, got, err, want))
					failed.Add(1)
					return
				}
				done.Add(1)
			}
		}()
	}
	reads := func() string {
		t.Helper()
		nc, err := net.Dial("tcp", listen)
		if err != nil {
			fail("dial: %v", err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(nc, "get marker\r\n")
		r := bufio.NewReader(nc)
		l, _ := r.ReadString('\n')
		v, _ := r.ReadString('\n')
		r.ReadString('\n')
		if !strings.HasPrefix(l, "VALUE marker") {
			fail("get marker: %q", l)
		}
		return strings.TrimSpace(v)
	}
	reloads := 0
	for i := range 6 {
		server := 2 - i%2 // 2, 1, 2, ...
		want := map[int]string{1: "one", 2: "two"}[server]
		writeRoutes(fmt.Sprintf(v2Routes, one.Port, two.Port, server))
		cmd.Process.Signal(syscall.SIGHUP)
		reloads++
		waitFor(t, fail, "reads from "+want, func() bool { return reads() == want })
		time.Sleep(100 * time.Millisecond)
	}
	// A broken file is refused; the routes that run keep serving.
	before := reads()
	writeRoutes("function mcp_config_pools(\n")
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, fail, "the refusal in the log", func() bool {
		return strings.Contains(logs.String(), "reload refused") && strings.Contains(logs.String(), "routes.lua:")
	})
	if got := reads(); got != before {
		fail("after the refused reload, reads answer %q, want %q", got, before)
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		fail("%d clients failed across %d reloads: %v", failed.Load(), reloads, firstErr.Load())
	}
	if done.Load() < 100 {
		fail("only %d requests done", done.Load())
	}
	t.Logf("%d verified set+get pairs across %d reloads by SIGHUP and one refused", done.Load(), reloads)
}

// storeDirect sets key to val on the memcached at addr.
func storeDirect(t *testing.T, fail func(string, ...any), addr, key, val string) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		fail("dial %s: %v", addr, err)
	}
	defer nc.Close()
	fmt.Fprintf(nc, "set %s 0 0 %d\r\n%s\r\n", key, len(val), val)
	if l, _ := bufio.NewReader(nc).ReadString('\n'); l != "STORED\r\n" {
		fail("set %s on %s: %q", key, addr, l)
	}
}

// TestLuaCronReload runs the binary with a route file whose cron calls
// mcp.schedule_config_reload once per load, as memcached's reload crons
// do: the proxy reloads its configuration file (trigger=lua), and the new
// routes, read from the file as it is then, serve.
func TestLuaCronReload(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	bin := testserver.Shardproxy(t)
	dir := t.TempDir()
	routes := filepath.Join(dir, "routes.lua")
	write := func(answer string) {
		t.Helper()
		src := `function mcp_config_pools()
  mcp.register_cron("again", { every = 1, rerun = false, func = function() mcp.schedule_config_reload() end })
  return {}
end
function mcp_config_routes(p)
  mcp.attach(mcp.CMD_MG, function(r) return "HD ` + answer + `\r\n" end)
end
`
		if err := os.WriteFile(routes, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	listen := loopback(t)
	conf := filepath.Join(dir, "conf.yml")
	if err := os.WriteFile(conf, []byte("p:\n  listen: "+listen+"\n  lua: routes.lua\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, logs, fail := startProxy(t, bin, "-c", conf, "-s", "0", "--admin", "")
	waitFor(t, fail, "the proxy to listen", func() bool { return strings.Contains(logs.String(), "shardproxy started") })
	write("two")
	waitFor(t, fail, "a reload the cron asked for", func() bool {
		return strings.Contains(logs.String(), `msg="reload done" trigger=lua`)
	})
	nc, err := net.Dial("tcp", listen)
	if err != nil {
		fail("dial: %v", err)
	}
	defer nc.Close()
	fmt.Fprint(nc, "mg k\r\n")
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if l, err := bufio.NewReader(nc).ReadString('\n'); err != nil || l != "HD two\r\n" {
		fail("after the cron's reload: %q, %v", l, err)
	}
}
