package sharding

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package at the bottom of the import graph: standard
// library, xxhash and murmur3 only (ARCHITECTURE.md).
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"github.com/cespare/xxhash/v2": true,
		"github.com/spaolacci/murmur3": true,
	}
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			stdlib := !strings.Contains(first, ".") && first != "shardproxy"
			if stdlib || allowed[path] {
				continue
			}
			t.Errorf("%s imports %s: sharding may import only the standard library, xxhash and murmur3", file, path)
		}
	}
}
