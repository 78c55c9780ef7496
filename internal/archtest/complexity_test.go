package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The complexity budget of issue 38: cyclomatic complexity counted as
// gocyclo counts it, over every non-test .go file of the repository
// (shardproxy's module and the nested bench module).
const (
	// complexLimit is the complexity past which a function counts as
	// complex; at most maxComplex functions may pass it.
	complexLimit = 15
	maxComplex   = 20

	// hardLimit is the complexity no function may pass, except a fuzzed
	// parser's state machine listed in stateMachines.
	hardLimit = 30

	// maxLines is the length past which a function must be split, or be
	// a listed state machine (issue 38: "every function over 80 lines
	// justified in a comment or split").
	maxLines = 80
)

// stateMachine is a fuzzed parser's state machine allowed past hardLimit:
// the function, and the Fuzz target in its directory's tests that drives
// it.
type stateMachine struct {
	dir  string // relative to the repository root: "resp"
	name string // as funcStat names it: "parseReply", "(*reader).deliver"
	fuzz string // "FuzzParseReply"
}

// stateMachines lists the functions allowed past hardLimit. A parser's
// state machine may stay long when one function reads better than many;
// its fuzz target is what keeps it honest. Entries are added on purpose,
// each with the reason in a comment, never to make the test pass.
var stateMachines = []stateMachine{}

// funcStat is one function's complexity.
type funcStat struct {
	dir        string // the directory relative to the repository root, slash-separated
	name       string // gocyclo's name: "run", "(*client).readGet"
	pos        token.Position
	complexity int
	lines      int // from the func keyword to the closing brace
}

// key names the function: its directory and name.
func (s funcStat) key() string { return s.dir + "." + s.name }

func (s funcStat) String() string {
	return fmt.Sprintf("%d %s %s:%d", s.complexity, s.key(), s.pos.Filename, s.pos.Line)
}

// complexity is the cyclomatic complexity of a function, the way gocyclo
// counts it: 1, plus one for each if, for and range statement, each case
// and select clause but the default one, and each && and ||. Function
// literals inside count toward the function that holds them.
func complexity(fn ast.Node) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

// fileStats returns the complexity of every function of a parsed file:
// each function and method, and each function literal that initialises a
// package-level variable (gocyclo counts those under the variable's name).
func fileStats(fset *token.FileSet, f *ast.File, dir string) []funcStat {
	var stats []funcStat
	add := func(node ast.Node, name string) {
		pos := fset.Position(node.Pos())
		stats = append(stats, funcStat{dir: dir, name: name, pos: pos, complexity: complexity(node),
			lines: fset.Position(node.End()).Line - pos.Line + 1})
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			add(decl, funcName(decl))
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				vs, ok := spec.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.FuncLit); ok {
						add(lit, vs.Names[0].Name)
					}
				}
			}
		}
	}
	return stats
}

// funcName is "Name" for a function and "(T).Name" or "(*T).Name" for a
// method, type parameters left out.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	return "(" + recvName(fn.Recv.List[0].Type) + ")." + fn.Name.Name
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	}
	return "BADRECV"
}

// skipDir reports the directories the walks leave out, as gocyclo and the
// go command do: testdata, vendor, and names starting with "." or "_".
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// treeStats returns the complexity of every function in the non-test .go
// files under root, bench/ included.
func treeStats(t *testing.T, root string) []funcStat {
	t.Helper()
	var stats []funcStat
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, s := range fileStats(fset, f, filepath.ToSlash(filepath.Dir(rel))) {
			s.pos.Filename = filepath.ToSlash(rel)
			stats = append(stats, s)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return stats
}

// budgetViolations returns what breaks the budget in stats: a function past
// hardLimit or maxLines that allowed does not list, too many functions past
// complexLimit, and an entry of allowed whose Fuzz target hasFuzz does not
// find.
func budgetViolations(stats []funcStat, allowed []stateMachine, hasFuzz func(dir, name string) bool) []string {
	var bad []string
	var complex []funcStat
	for _, s := range stats {
		if s.lines > maxLines && !isStateMachine(allowed, s) {
			bad = append(bad, fmt.Sprintf("%s: %d lines, over %d; split it where a reader would", s, s.lines, maxLines))
		}
		if s.complexity <= complexLimit {
			continue
		}
		complex = append(complex, s)
		if s.complexity > hardLimit && !isStateMachine(allowed, s) {
			bad = append(bad, fmt.Sprintf("%s: complexity over %d; split it where a reader would", s, hardLimit))
		}
	}
	if len(complex) > maxComplex {
		sort.Slice(complex, func(i, j int) bool { return complex[i].complexity > complex[j].complexity })
		var list []string
		for _, s := range complex {
			list = append(list, "\t"+s.String())
		}
		bad = append(bad, fmt.Sprintf("%d functions over complexity %d, at most %d allowed:\n%s",
			len(complex), complexLimit, maxComplex, strings.Join(list, "\n")))
	}
	for _, m := range allowed {
		if !hasFuzz(m.dir, m.fuzz) {
			bad = append(bad, fmt.Sprintf("stateMachines: %s.%s names %s, which is no Fuzz target in %s", m.dir, m.name, m.fuzz, m.dir))
		}
	}
	sort.Strings(bad)
	return bad
}

func isStateMachine(allowed []stateMachine, s funcStat) bool {
	for _, m := range allowed {
		if m.dir == s.dir && m.name == s.name {
			return true
		}
	}
	return false
}

// hasFuzzTarget reports whether the _test.go files of dir (relative to
// root) declare a function called name.
func hasFuzzTarget(t *testing.T, root, dir, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == name {
				return true
			}
		}
	}
	return false
}

// TestComplexityBudget checks issue 38's budget over the whole repository:
// no function past hardLimit but the listed state machines, and at most
// maxComplex functions past complexLimit. The figures agree with
// `gocyclo -over 15 -ignore _test.go .` run at the root.
func TestComplexityBudget(t *testing.T) {
	stats := treeStats(t, moduleRoot)
	if len(stats) < 1000 {
		t.Fatalf("found %d functions under %s; is the walk reading the repository?", len(stats), moduleRoot)
	}
	bad := budgetViolations(stats, stateMachines, func(dir, name string) bool { return hasFuzzTarget(t, moduleRoot, dir, name) })
	over, worst := 0, funcStat{}
	for _, s := range stats {
		if s.complexity > complexLimit {
			over++
		}
		if s.complexity > worst.complexity {
			worst = s
		}
	}
	t.Logf("%d functions, %d over complexity %d (budget %d); the most complex: %s", len(stats), over, complexLimit, maxComplex, worst)
	for _, b := range bad {
		t.Error(b)
	}
}

func TestComplexity(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"empty", `func f() {}`, 1},
		{"straight line", `func f(a int) int { b := a + 1; return b * 2 }`, 1},
		{"if", `func f(a int) { if a > 0 { a-- } }`, 2},
		{"if else if else", `func f(a int) { if a > 0 { a-- } else if a < 0 { a++ } else { a = 1 } }`, 3},
		{"for", `func f() { for i := 0; i < 3; i++ {} }`, 2},
		{"bare for", `func f() { for { break } }`, 2},
		{"range", `func f(s []int) { for range s {} }`, 2},
		{"and or", `func f(a, b, c bool) bool { return a && b || c }`, 3},
		{"other operators", `func f(a, b int) bool { return a == b || a&b != 0 }`, 2},
		{"switch, default free", `func f(a int) { switch a { case 1: case 2, 3: default: } }`, 3},
		{"type switch", `func f(a any) { switch a.(type) { case int: case string: default: } }`, 3},
		{"select, default free", `func f(a, b chan int) { select { case <-a: case b <- 1: default: } }`, 3},
		{"closure counts toward its function", `func f(s []int) { g := func() { if len(s) > 0 {} }; g() }`, 2},
		{"method", `func (c *conn) f(a int) { if a > 0 && a < 9 {} }`, 3},
		{"package-level func literal", `var f = func(a int) { for a > 0 { a-- } }`, 2},
		{"everything", `func f(s []int, ch chan int) int {
	n := 0
	for _, v := range s {
		switch {
		case v > 0 && v < 10:
			n++
		case v < 0 || v > 100:
			n--
		}
	}
	select {
	case v := <-ch:
		if v == 0 {
			return 0
		}
	default:
	}
	return n
}`, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", "package x\n\n"+tt.src+"\n", 0)
			if err != nil {
				t.Fatal(err)
			}
			stats := fileStats(fset, f, "x")
			if len(stats) != 1 {
				t.Fatalf("found %d functions, want 1", len(stats))
			}
			if got := stats[0].complexity; got != tt.want {
				t.Errorf("complexity = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestFuncName(t *testing.T) {
	src := `package x
func plain() {}
func (c conn) value() {}
func (c *conn) pointer() {}
func (l *list[T]) generic() {}
func (m *pair[K, V]) generic2() {}
var lit = func() {}
`
	want := []string{"x.plain", "x.(conn).value", "x.(*conn).pointer", "x.(*list).generic", "x.(*pair).generic2", "x.lit"}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range fileStats(fset, f, "x") {
		got = append(got, s.key())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("names = %v, want %v", got, want)
	}
}

func TestBudgetViolations(t *testing.T) {
	fn := func(name string, c int) funcStat { return funcStat{dir: "p", name: name, complexity: c} }
	var many []funcStat
	for i := range maxComplex {
		many = append(many, fn(fmt.Sprint("f", i), complexLimit+1))
	}
	fuzz := func(dir, name string) bool { return dir == "p" && name == "FuzzG" }
	machine := []stateMachine{{dir: "p", name: "g", fuzz: "FuzzG"}}
	tests := []struct {
		name    string
		stats   []funcStat
		allowed []stateMachine
		want    int // violations
	}{
		{"as many complex functions as allowed", many, nil, 0},
		{"one complex function too many", append(many[:len(many):len(many)], fn("g", complexLimit+1)), nil, 1},
		{"at the hard limit", []funcStat{fn("g", hardLimit)}, nil, 0},
		{"past the hard limit", []funcStat{fn("g", hardLimit+1)}, nil, 1},
		{"a listed state machine past the hard limit", []funcStat{fn("g", hardLimit+10)}, machine, 0},
		{"another function past the hard limit", []funcStat{fn("h", hardLimit+1)}, machine, 1},
		{"a listed state machine counts as complex", append(many[:len(many):len(many)], fn("g", hardLimit+1)), machine, 1},
		{"a state machine without its fuzz target", nil, []stateMachine{{dir: "p", name: "g", fuzz: "FuzzH"}}, 1},
		{"at the line limit", []funcStat{{dir: "p", name: "h", lines: maxLines}}, nil, 0},
		{"past the line limit", []funcStat{{dir: "p", name: "h", lines: maxLines + 1}}, nil, 1},
		{"a listed state machine past the line limit", []funcStat{{dir: "p", name: "g", lines: maxLines + 40}}, machine, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if bad := budgetViolations(tt.stats, tt.allowed, fuzz); len(bad) != tt.want {
				t.Errorf("got %d violations %q, want %d", len(bad), bad, tt.want)
			}
		})
	}
}
