// Package docs holds shardproxy's user documentation, one Markdown page per
// subject; README.md at the repository root is its front door. The package
// has no code: its test fails on a relative link or an #anchor in any of
// the repository's Markdown files that leads nowhere.
package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, seen from this package's directory.
const root = ".."

// TestLinks checks every relative link of every Markdown file of the
// repository: the file or directory it names exists, and its #anchor, if
// any, is a heading of the target as GitHub derives anchors.
func TestLinks(t *testing.T) {
	files := markdownFiles(t, root)
	for _, must := range []string{"README.md", "ARCHITECTURE.md", "docs/configuration.md"} {
		if !slices.Contains(files, must) {
			t.Fatalf("found %d Markdown files, not %s: %v", len(files), must, files)
		}
	}
	for _, f := range files {
		for _, p := range brokenLinks(t, root, f) {
			t.Error(p)
		}
	}
}

// markdownFiles returns the Markdown files under dir, relative to it and
// with forward slashes: the ones git tracks or would track (so build and
// test output it ignores is left out), or, outside a git checkout, every
// one but those in hidden directories and testdata.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md")
	cmd.Dir = dir
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if _, err := os.Stat(filepath.Join(dir, f)); f != "" && err == nil {
				files = append(files, f)
			}
		}
		return files
	}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(dir, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// inlineLink is [text](target) or ![alt](target), with an optional
	// "title"; reference is a link reference definition, [label]: target.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	reference  = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
)

// brokenLinks returns one line for each relative link in file (relative to
// dir) that names no file, or an anchor its target does not have.
func brokenLinks(t *testing.T, dir, file string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	var broken []string
	for _, l := range links(string(text)) {
		target, anchor, _ := strings.Cut(l.target, "#")
		if isExternal(target) {
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(file))
		if target != "" {
			if strings.HasPrefix(target, "/") {
				path = filepath.Join(dir, filepath.FromSlash(target))
			} else {
				path = filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			}
		}
		if _, err := os.Stat(path); err != nil {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no such file", file, l.line, l.target))
			continue
		}
		if anchor == "" || !strings.HasSuffix(path, ".md") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(anchors(string(b)), anchor) {
			broken = append(broken, fmt.Sprintf("%s:%d: %s: no heading makes the anchor #%s", file, l.line, l.target, anchor))
		}
	}
	return broken
}

// isExternal reports whether a link target leaves the repository: it has
// a scheme (https:, mailto:) or names a host (//host/...).
func isExternal(target string) bool {
	if strings.HasPrefix(target, "//") {
		return true
	}
	scheme, _, ok := strings.Cut(target, ":")
	return ok && scheme != "" && !strings.ContainsAny(scheme, "/.#")
}

// link is one link target and the line it is on.
type link struct {
	target string
	line   int
}

// links returns the targets of the inline links and link reference
// definitions in a Markdown text, leaving out fenced code blocks and code
// spans, where brackets are no links.
func links(text string) []link {
	var out []link
	for n, line := range prose(text) {
		line = codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, link{m[1], n})
		}
		for _, m := range reference.FindAllStringSubmatch(line, -1) {
			out = append(out, link{m[1], n})
		}
	}
	return out
}

// prose yields the lines of a Markdown text outside fenced code blocks,
// each with its line number, from 1.
func prose(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		fence := ""
		for i, line := range strings.Split(text, "\n") {
			trimmed := strings.TrimSpace(line)
			if fence != "" {
				if strings.HasPrefix(trimmed, fence) {
					fence = ""
				}
				continue
			}
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				fence = trimmed[:3]
				continue
			}
			if !yield(i+1, line) {
				return
			}
		}
	}
}

// anchors returns the anchors GitHub makes for the headings of a Markdown
// text, in order: each heading's anchor (see anchor), with -1, -2, ...
// added to the second, third, ... heading that makes the same one.
func anchors(text string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range prose(text) {
		h, ok := heading(line)
		if !ok {
			continue
		}
		a := anchor(h)
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out = append(out, a)
	}
	return out
}

// heading returns the text of an ATX heading line ("## Text"), without its
// closing #s.
func heading(line string) (string, bool) {
	if len(line)-len(strings.TrimLeft(line, " ")) > 3 {
		return "", false
	}
	line = strings.TrimLeft(line, " ")
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n < 1 || n > 6 || (len(line) > n && line[n] != ' ' && line[n] != '\t') {
		return "", false
	}
	text := strings.TrimSpace(line[n:])
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") {
		text = strings.TrimSpace(t)
	}
	return text, true
}

// linkText keeps the text of a link or image in a heading.
var linkText = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)

// anchor is the anchor GitHub makes for a heading's text: the text as
// rendered (a link's text, no markup), in lower case, with every
// character but letters, digits, spaces, '-' and '_' dropped and each
// space made '-'. "The stats port and twemproxy's" is
// "the-stats-port-and-twemproxys"; "`make run` and `-t`" is "make-run-and--t".
func anchor(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b bytes.Buffer
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
