package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shardproxy/internal/testserver"
)

// okRoutes is a route file whose config stage and routes build.
const okRoutes = `
function mcp_config_pools()
    local b = mcp.backend("b1", "127.0.0.1", 9)
    return { main = mcp.pool({ b }) }
end
function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local h = fgen:new_handle(pools.main)
    fgen:ready({ n = "direct", f = function(rctx) return function(r) return rctx:enqueue_and_wait(r, h) end end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
`

// TestConfigTest runs the binary's -t on configurations that start would
// refuse: each exits 1 naming the cause; the good ones exit 0 with
// nutcracker's words, at once, having dialed nothing.
func TestConfigTest(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds the binary")
	}
	bin := testserver.Shardproxy(t)
	dir := t.TempDir()
	files := map[string]string{
		"ok.lua":     okRoutes,
		"syntax.lua": "function mcp_config_pools(\n  return {}\nend\n",
		"raises.lua": "function mcp_config_pools()\n  error(\"no pools configured for this host\")\nend\n" +
			"function mcp_config_routes(p) end\n",
		"garbage.pem": "not a certificate\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pki := testserver.NewPKI(t)
	for from, to := range map[string]string{pki.ServerCert: "server.pem", pki.ServerKey: "server.key"} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, to), b, 0o600)
	}
	listen := loopback(t)
	pool := func(extra string) string {
		return "alpha:\n  listen: " + listen + "\n" + extra
	}
	servers := "  servers:\n    - 127.0.0.1:9:1\n"
	for _, tc := range []struct {
		name, yaml string
		want       []string // in stderr; none: -t passes
	}{
		{"sharded", pool("  preconnect: true\n" + servers), nil},
		{"lua", pool("  lua: ok.lua\n"), nil},
		{"tls", pool("  tls_cert: server.pem\n  tls_key: server.key\n" + servers), nil},
		{"cluster", pool("  redis: true\n  redis_cluster: true\n  servers:\n    - 127.0.0.1:9:1\n"), nil},
		{"missing lua file", pool("  lua: nope.lua\n"), []string{"nope.lua", "no such file"}},
		{"lua syntax error", pool("  lua: syntax.lua\n"), []string{"syntax.lua"}},
		{"lua config stage raises", pool("  lua: raises.lua\n"), []string{"raises.lua", "no pools configured for this host"}},
		{"missing tls file", pool("  tls_cert: nope.pem\n  tls_key: server.key\n" + servers), []string{"tls_cert", "nope.pem"}},
		{"bad tls file", pool("  tls_cert: garbage.pem\n  tls_key: server.key\n" + servers), []string{"tls_cert", "garbage.pem"}},
		{"missing client ca", pool("  tls_cert: server.pem\n  tls_key: server.key\n  tls_client_ca: nope-ca.pem\n" + servers), []string{"tls_client_ca", "nope-ca.pem"}},
		{"missing server tls key", pool("  server_tls: true\n  server_tls_cert: server.pem\n  server_tls_key: nope.key\n" + servers), []string{"server_tls_key", "nope.key"}},
		{"bad listen address", "alpha:\n  listen: 999.0.0.1:22121\n" + servers, []string{`pool "alpha"`, "999.0.0.1"}},
		{"listen host unknown", "alpha:\n  listen: nosuchhost.invalid:22121\n" + servers, []string{"nosuchhost.invalid"}},
		{"unix socket directory missing", "alpha:\n  listen: " + filepath.Join(dir, "nodir", "s.sock") + "\n" + servers, []string{"nodir"}},
		{"bad admin address", pool(servers) + "shardproxy:\n  stats_listen: nosuchhost.invalid:22222\n", []string{"stats listen", "nosuchhost.invalid"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yml")
			if err := os.WriteFile(conf, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, bin, "-t", "-c", conf, "-s", "0", "--admin", "")
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			code := cmd.ProcessState.ExitCode()
			if tc.want == nil {
				want := "shardproxy: configuration file '" + conf + "' syntax is ok\n"
				if err != nil || stdout.String() != want {
					t.Fatalf("-t: %v, exit %d, stdout %q, stderr %q; want %q", err, code, stdout.String(), stderr.String(), want)
				}
				if took > 3*time.Second {
					t.Errorf("-t took %v", took)
				}
				return
			}
			prefix := "shardproxy: configuration file '" + conf + "' syntax is invalid: "
			if code != 1 || !strings.Contains(stderr.String(), prefix) {
				t.Fatalf("-t: exit %d, stderr %q; want exit 1 and %q", code, stderr.String(), prefix)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("-t error lacks %q: %s", w, stderr.String())
				}
			}
		})
	}
}
