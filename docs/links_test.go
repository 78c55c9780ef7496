package docs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Configuration reference", "configuration-reference"},
		{"The stats port and twemproxy's", "the-stats-port-and-twemproxys"},
		{"V2: function generators (memcached 1.6.45's API)", "v2-function-generators-memcached-1645s-api"},
		{"What `make bench` measures", "what-make-bench-measures"},
		{"`make run` and `-t`", "make-run-and--t"},
		{"Pub/sub", "pubsub"},
		{"snake_case keys", "snake_case-keys"},
		{"[Redis Cluster](redis-cluster.md) pools", "redis-cluster-pools"},
		{"Größe und Maß", "größe-und-maß"},
		{"RESP3", "resp3"},
	} {
		if got := anchor(tc.heading); got != tc.want {
			t.Errorf("anchor(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestAnchors(t *testing.T) {
	text := "# Top\n\nSome text.\n## Top\n### Top ###\n```\n# Not a heading\n```\n" +
		"    # indented code\n#NoSpace\n## Other\n#### Top\n"
	want := []string{"top", "top-1", "top-2", "other", "top-3"}
	if got := anchors(text); !slices.Equal(got, want) {
		t.Errorf("anchors = %q, want %q", got, want)
	}
}

func TestIsExternal(t *testing.T) {
	for target, want := range map[string]bool{
		"https://example.com/a.md": true,
		"http://example.com":       true,
		"mailto:ops@example.com":   true,
		"//example.com/x":          true,
		"docs/lua.md":              false,
		"../README.md":             false,
		"":                         false,
		"a.md":                     false,
	} {
		if got := isExternal(target); got != want {
			t.Errorf("isExternal(%q) = %v, want %v", target, got, want)
		}
	}
}

// TestBrokenLinks builds a small tree with good and broken links and checks
// that exactly the broken ones are reported.
func TestBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.md", "# The title\n\n## The title\n")
	write("sub/c.md", "# C\n\n[up](../b.md#the-title-1) [gone up](../nope.md)\n")
	write("a.md", `# Top heading

[ok](b.md) [anchor](b.md#the-title) [second](b.md#the-title-1) [self](#top-heading)
[dir](sub) [nested](sub/c.md#c) [external](https://example.com/x.md#y) ![img](sub/c.md)
[missing file](c.md) [missing anchor](b.md#nope) [missing self](#nowhere)
![missing image](img.png) `+"`[in code](code.md)`"+`

`+"```"+`
[in a fence](fence.md)
`+"```"+`

[ref]: gone.md
`)
	got := append(brokenLinks(t, dir, "a.md"), brokenLinks(t, dir, "sub/c.md")...)
	want := []string{
		"a.md:5: c.md: no such file",
		"a.md:5: b.md#nope: no heading makes the anchor #nope",
		"a.md:5: #nowhere: no heading makes the anchor #nowhere",
		"a.md:6: img.png: no such file",
		"a.md:12: gone.md: no such file",
		"sub/c.md:3: ../nope.md: no such file",
	}
	if !slices.Equal(got, want) {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	files := markdownFiles(t, dir)
	slices.Sort(files)
	if want := []string{"a.md", "b.md", "sub/c.md"}; !slices.Equal(files, want) {
		t.Errorf("markdownFiles = %q, want %q", files, want)
	}
}
