package config

import (
	"strings"
	"testing"
)

func TestDefaultVersion(t *testing.T) {
	if got := mustParse(t, pool("")).Pools[0].DefaultVersion; got != DefaultVersion {
		t.Errorf("default default_version %q, want %q", got, DefaultVersion)
	}
	for _, v := range []string{"1.4.0", "1.6.45", "1.4.5-beta", "10.20.30", "1.6.0_rc1"} {
		c := mustParse(t, pool("  default_version: "+v+"\n"))
		if got := c.Pools[0].DefaultVersion; got != v {
			t.Fatalf("default_version %q, want %q", got, v)
		}
		text, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(text), "default_version: "+v+"\n") {
			t.Errorf("marshaled pool lacks default_version:\n%s", text)
		}
		if again := mustParse(t, string(text)); again.Pools[0].Checksum() != c.Pools[0].Checksum() {
			t.Errorf("round trip changed the pool:\n%s", text)
		}
		if mustParse(t, pool("")).Pools[0].Checksum() == c.Pools[0].Checksum() {
			t.Error("default_version leaves the checksum unchanged: a reload would keep the old pool")
		}
	}
	lua := "alpha:\n  listen: 127.0.0.1:22121\n  default_version: 1.4.0\n  lua: routes.lua\n"
	if got := mustParse(t, lua).Pools[0].DefaultVersion; got != "1.4.0" {
		t.Errorf("Lua pool default_version %q", got)
	}
	why := " is not a version such as 1.6.18 (major.minor.patch, no spaces)"
	for _, tt := range []struct{ name, text, want string }{
		{"two numbers", pool("  default_version: \"1.6\"\n"), `config: testdata/x.yml:3: pool "alpha": default_version: "1.6"` + why},
		{"not a number", pool("  default_version: one.two.three\n"), `config: testdata/x.yml:3: pool "alpha": default_version: "one.two.three"` + why},
		{"space", pool("  default_version: \"1.6.18 x\"\n"), `config: testdata/x.yml:3: pool "alpha": default_version: "1.6.18 x"` + why},
		{"empty", pool("  default_version: \"\"\n"), `config: testdata/x.yml:3: pool "alpha": default_version: ""` + why},
		{"trailing dot", pool("  default_version: 1.6.\n"), `config: testdata/x.yml:3: pool "alpha": default_version: "1.6."` + why},
		{"redis", pool("  redis: true\n  default_version: 1.6.18\n"),
			`config: testdata/x.yml:4: pool "alpha": default_version: is only valid for a memcache pool`},
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
