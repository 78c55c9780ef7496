package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzParse checks that no input panics, that every error is a located
// config error, and that what parses survives Marshal and Parse unchanged.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "a:\n", "- x\n", "a: &x\n  b: *x\n", "---\n---\n",
		pool("  hash_tag: \"{}\"\n  timeout: -1\n"),
		pool("") + "   - /tmp/s:1\n   - ::1:1:1 n\n",
		"a:\n  listen: /tmp/a 0777\n  servers:\n   - \"h:1:1 \\\"q\\\"\"\n",
		sentinelPool("  sentinel_auth: pw\n  sentinel_auth_user: u\n"),
		dnsPool("    dns: _mc._tcp.x.\n    interval: 100\n    max_change: 0.25\n    max_servers: 9\n"),
		dnsPool("    dns: x\n    type: aaaa\n    port: 1\n    resolver: \"[::1]:53\"\n") + "  servers:\n   - 127.0.0.1:1:1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yml")
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "config: fuzz.yml") {
					t.Fatalf("error line %q lacks the source", line)
				}
			}
			return
		}
		checkConfig(t, c)
		text, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse(text, "fuzz.yml")
		if err != nil {
			t.Fatalf("marshaled config does not parse: %v\n%s", err, text)
		}
		if len(again.Pools) != len(c.Pools) {
			t.Fatalf("round trip: %d pools, want %d", len(again.Pools), len(c.Pools))
		}
		for i, p := range c.Pools {
			if again.Pools[i].Checksum() != p.Checksum() {
				t.Fatalf("round trip changed pool %q:\n got %+v\nwant %+v\n%s", p.Name, *again.Pools[i], *p, text)
			}
		}
	})
}

// checkConfig asserts what every parsed Config guarantees.
func checkConfig(t *testing.T, c *Config) {
	t.Helper()
	if len(c.Pools) == 0 {
		t.Fatal("no pools")
	}
	listens := make(map[Listen]bool)
	for i, p := range c.Pools {
		if i > 0 && compareNames(c.Pools[i-1].Name, p.Name) >= 0 {
			t.Fatalf("pools %q and %q out of order", c.Pools[i-1].Name, p.Name)
		}
		l := Listen{Network: p.Listen.Network, Addr: p.Listen.Addr}
		if p.Listen.Addr == "" || listens[l] {
			t.Fatalf("pool %q: bad or shared listen %+v", p.Name, p.Listen)
		}
		listens[l] = true
		if (len(p.Servers) == 0 && p.ServersFrom == nil && p.Lua == "") || p.ServerConnections < 1 || p.ConnectTimeout <= 0 {
			t.Fatalf("pool %q: %+v", p.Name, *p)
		}
		if sf := p.ServersFrom; sf != nil && (sf.DNS == "" || sf.Interval < MinDNSInterval || sf.MaxChange <= 0 ||
			sf.MaxChange > 1 || sf.MaxServers < 1 || (sf.Type == DNSTypeSRV) != (sf.Port == 0)) {
			t.Fatalf("pool %q: servers_from %+v", p.Name, *sf)
		}
		if p.HashTag != "" && len(p.HashTag) != 2 {
			t.Fatalf("pool %q: hash tag %q", p.Name, p.HashTag)
		}
		names := make(map[string]bool)
		for _, s := range p.Servers {
			if s.Weight < 1 || s.Name == "" || names[s.Name] || (s.Addr == "") != (s.Master != "") {
				t.Fatalf("pool %q: bad server %+v", p.Name, s)
			}
			names[s.Name] = true
		}
	}
}

// FuzzServerLine checks that a servers line that parses is written back by
// Marshal as a line that parses to the same server.
func FuzzServerLine(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:11211:1", "127.0.0.1:11212:1", "h:6380:1 server1", "/tmp/s.sock:1",
		"/tmp/s.sock:2 local", "::1:6379:1", "[::1]:6379:1", "h:011211:1", "h:06379:1 a:b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, msg := parseServer(line)
		if msg != "" {
			return
		}
		again, msg := parseServer(s.text())
		if msg != "" || again != s {
			t.Fatalf("%q -> %+v -> %q -> %+v (%s)", line, s, s.text(), again, msg)
		}
	})
}

// FuzzMasterLine checks the same for the servers lines of a pool with
// sentinels.
func FuzzMasterLine(f *testing.F) {
	for _, s := range []string{"m:1", "shard-a:2 a", "m:1 m", "m:0", "a:b:1", "m:1 n:x", " :1", "m\x00:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s, msg := parseMaster(line)
		if msg != "" {
			return
		}
		again, msg := parseMaster(s.text())
		if msg != "" || again != s {
			t.Fatalf("%q -> %+v -> %q -> %+v (%s)", line, s, s.text(), again, msg)
		}
	})
}

// FuzzListen checks the same for listen values.
func FuzzListen(f *testing.F) {
	for _, s := range []string{"127.0.0.1:22121", ":1", "::1:2", "[::1]:3", "/tmp/gamma 0666", "/tmp/x", "/a b 7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, msg := parseListen(s)
		if msg != "" {
			return
		}
		again, msg := parseListen(l.text())
		if msg != "" || again != l {
			t.Fatalf("%q -> %+v -> %q -> %+v (%s)", s, l, l.text(), again, msg)
		}
	})
}

// FuzzValues puts arbitrary text, quoted by the YAML encoder, into the
// string-valued keys of a pool and checks Parse and the Marshal round trip.
func FuzzValues(f *testing.F) {
	f.Add("alpha", "secret", "{}", "127.0.0.1:11211:1 server1", "127.0.0.1:22121")
	f.Add("b", "", "$$", "/tmp/s:1", "/tmp/b 0600")
	f.Add("x: y", "a\nb", "\x00\x01", "::1:1:1", "[::1]:1")
	f.Fuzz(func(t *testing.T, name, auth, tag, server, listen string) {
		m := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
			str("listen"), str(listen),
			str("redis"), boolean(true),
			str("redis_auth"), str(auth),
			str("hash_tag"), str(tag),
			str("servers"), {Kind: yaml.SequenceNode, Content: []*yaml.Node{str(server)}},
		}}
		text, err := yaml.Marshal(&yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str(name), m}})
		if err != nil {
			return // yaml.v3 refuses to encode some strings (invalid UTF-8)
		}
		c, err := Parse(text, "fuzz.yml")
		if err != nil {
			return
		}
		checkConfig(t, c)
		// What the YAML says is what yaml.v3 reads back, which is not
		// always what it was given ("\n00" encodes as a block scalar that
		// reads "00"): Parse must agree with the YAML reader.
		var doc map[string]map[string]any
		if err := yaml.Unmarshal(text, &doc); err != nil || len(doc) != 1 {
			t.Fatalf("Parse accepted what yaml.v3 cannot read: %v\n%s", err, text)
		}
		for k, v := range doc {
			name = k
			auth, _ = v["redis_auth"].(string)
			tag, _ = v["hash_tag"].(string)
		}
		p := c.Pools[0]
		if p.Name != name || p.RedisAuth != auth || p.HashTag != tag || len(p.Servers) != 1 {
			t.Fatalf("values changed: %q %q %q -> %+v\n%s", name, auth, tag, *p, text)
		}
		out, err := c.Marshal()
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse(out, "fuzz.yml")
		if err != nil || again.Pools[0].Checksum() != p.Checksum() {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
	})
}
