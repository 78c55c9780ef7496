package config

import (
	"strings"
	"testing"
)

func TestServerProtocol(t *testing.T) {
	if got := mustParse(t, pool("")).Pools[0].ServerProtocol; got != ServerProtocolAuto {
		t.Errorf("default server_protocol %q, want %q", got, ServerProtocolAuto)
	}
	for _, sp := range []string{ServerProtocolMeta, ServerProtocolText} {
		c := mustParse(t, pool("  server_protocol: "+sp+"\n"))
		if got := c.Pools[0].ServerProtocol; got != sp {
			t.Fatalf("server_protocol %q, want %s", got, sp)
		}
		text, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "server_protocol: "+sp+"\n") {
			t.Errorf("marshaled pool lacks server_protocol:\n%s", text)
		}
		if again := mustParse(t, string(text)); again.Pools[0].Checksum() != c.Pools[0].Checksum() {
			t.Errorf("round trip changed the pool:\n%s", text)
		}
		if mustParse(t, pool("")).Pools[0].Checksum() == c.Pools[0].Checksum() {
			t.Errorf("server_protocol %s leaves the checksum unchanged: a reload would keep the old pool", sp)
		}
	}
	if text, _ := mustParse(t, pool("  server_protocol: auto\n")).Marshal(); strings.Contains(string(text), "server_protocol") {
		t.Errorf("the default server_protocol is marshaled:\n%s", text)
	}

	failover := func(alpha, beta string) string {
		return pool("  auto_eject_hosts: true\n  eject_policy: failover\n  failover_pool: beta\n"+alpha) +
			"beta:\n  listen: 127.0.0.1:22200\n" + beta + "  servers:\n   - 127.0.0.1:11212:1\n"
	}
	mustParse(t, failover("  server_protocol: meta\n", "  server_protocol: meta\n"))
	if c := mustParse(t, "alpha:\n  listen: 127.0.0.1:22121\n  server_protocol: meta\n  lua: routes.lua\n"); c.Pools[0].ServerProtocol != ServerProtocolMeta {
		t.Errorf("a Lua pool's server_protocol: got %q, want meta", c.Pools[0].ServerProtocol)
	}
	lua := mustParse(t, "alpha:\n  listen: 127.0.0.1:22121\n  lua: routes.lua\n")
	if got := lua.Pools[0].ServerProtocol; got != ServerProtocolText {
		t.Errorf("a Lua pool's default server_protocol: got %q, want text (what the route sends)", got)
	}
	if c := mustParse(t, "alpha:\n  listen: 127.0.0.1:22121\n  server_protocol: auto\n  lua: routes.lua\n"); c.Pools[0].ServerProtocol != ServerProtocolAuto {
		t.Errorf("a Lua pool's server_protocol: got %q, want auto", c.Pools[0].ServerProtocol)
	}
	if text, _ := lua.Marshal(); strings.Contains(string(text), "server_protocol") {
		t.Errorf("a Lua pool's default server_protocol is marshaled:\n%s", text)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"unknown", pool("  server_protocol: binary\n"),
			`config: testdata/x.yml:3: pool "alpha": server_protocol: unknown value "binary"; want auto, text or meta`},
		{"redis", pool("  redis: true\n  server_protocol: meta\n"),
			`config: testdata/x.yml:4: pool "alpha": server_protocol: meta is only valid for a memcache pool`},
		{"failover to a text pool", failover("  server_protocol: meta\n", ""),
			`config: testdata/x.yml:5: pool "alpha": failover_pool: pool "beta" has server_protocol auto, this pool meta: a request is written once, for both`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text), src)
			if err == nil {
				t.Fatalf("no error for\n%s", tt.text)
			}
			if got := strings.Split(err.Error(), "\n")[0]; got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}
