package lua

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	glua "github.com/yuin/gopher-lua"
)

// A route file may load other Lua files with dofile, loadfile and
// require, as memcached's route files do (routelib loads its
// configuration, mcp.start_arg, with dofile), while it loads: at its top
// level, in mcp_config_pools and in mcp_config_routes, not in a handler or
// a cron. The files it may read are those in its own directory and below,
// in the directories Config.Dirs names (lua_dirs) and below, and the file
// lua_arg names (Config.StartArgFile); a path that leads elsewhere, by
// ".." or through a symbolic link, is refused naming the directories. A relative path is relative to the route file's directory
// (memcached's is relative to its working directory), but the exact text
// of mcp.start_arg names the lua_arg file wherever it is.
//
//   - dofile(path) runs the file and returns what it returns; an error in
//     it is raised.
//   - loadfile(path) returns the file compiled as a function, or nil and a
//     message.
//   - require(name) runs NAME.lua (dots in name are directories: a.b is
//     a/b.lua; then NAME/init.lua) from the route file's directory once
//     per Lua state, passing name, and returns what it returned (true when
//     nothing); later calls return that value again.
//
// Each file is read and compiled once per router (the first state to load
// it), so every state runs the same code.

// files is what a router's states may load, and the code read so far.
type files struct {
	dir      string   // the route file's directory, as the route file is named
	dirs     []string // dir, then Config.Dirs: where files may be read
	realDirs []string // dirs with symbolic links resolved, those that can be
	arg      string   // mcp.start_arg's text, "" when there is none
	argFile  string   // the file it names, as given
	realArg  string   // argFile with symbolic links resolved; "" if none

	mu     sync.Mutex
	protos map[string]*glua.FunctionProto // by resolved path
}

func newFiles(cfg *Config) *files {
	f := &files{dir: filepath.Dir(cfg.Path), arg: cfg.StartArg, protos: map[string]*glua.FunctionProto{}}
	f.dirs = append([]string{f.dir}, cfg.Dirs...)
	for _, d := range f.dirs {
		if real, err := filepath.EvalSymlinks(d); err == nil {
			f.realDirs = append(f.realDirs, real)
		}
	}
	if cfg.StartArg != "" {
		f.argFile = cfg.StartArgFile
		if f.argFile == "" {
			f.argFile = f.join(cfg.StartArg)
		}
		f.realArg, _ = filepath.EvalSymlinks(f.argFile)
	}
	return f
}

// join makes name, relative, relative to the route file's directory.
func (f *files) join(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(f.dir, name)
}

// errNoFile marks a file that is not there (require tries the next).
var errNoFile = errors.New("no such file")

// resolve returns the path to read for name and its symlink-free form, or
// an error saying why it may not be read.
func (f *files) resolve(name string) (path, real string, err error) {
	path = f.join(name)
	if f.arg != "" && name == f.arg {
		path = f.argFile
	}
	real, err = filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return path, "", fmt.Errorf("cannot open %s: %w", name, errNoFile)
		}
		return path, "", fmt.Errorf("cannot open %s: %v", name, err)
	}
	if real == f.realArg {
		return path, real, nil
	}
	for _, dir := range f.realDirs {
		if rel, err := filepath.Rel(dir, real); err == nil && rel != ".." &&
			!strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return path, real, nil
		}
	}
	return path, "", fmt.Errorf("cannot open %s: a route file may load only the files in %s and below (add a directory to the pool's lua_dirs), and its lua_arg file", name, strings.Join(f.dirs, ", "))
}

// load returns the compiled code of name.
func (f *files) load(name string) (*glua.FunctionProto, error) {
	path, real, err := f.resolve(name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.protos[real]; ok {
		return p, nil
	}
	src, err := os.ReadFile(real)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", name, err)
	}
	p, err := compile(path, src)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Line > 0 {
			return nil, fmt.Errorf("%s:%d: %s", ce.File, ce.Line, ce.Msg)
		}
		return nil, err
	}
	f.protos[real] = p
	return p, nil
}

// loaders are the dofile, loadfile and require of one state; loading is
// whether the state may use them now.
type loaders struct {
	f       *files
	loading bool
	loaded  map[string]glua.LValue // require's modules
	busy    map[string]bool        // modules being required now
}

// installLoaders gives L dofile, loadfile and require; the caller clears
// loading once the route file has loaded.
func (r *Router) installLoaders(L *glua.LState) *loaders {
	ld := &loaders{f: r.files, loading: true, loaded: map[string]glua.LValue{}, busy: map[string]bool{}}
	L.SetGlobal("dofile", L.NewFunction(ld.dofile))
	L.SetGlobal("loadfile", L.NewFunction(ld.loadfile))
	L.SetGlobal("require", L.NewFunction(ld.require))
	return ld
}

func (ld *loaders) check(L *glua.LState, what string) {
	if !ld.loading {
		L.RaiseError("%s can only be called while the route file loads (its top level, mcp_config_pools, mcp_config_routes)", what)
	}
}

// dofile is dofile(path).
func (ld *loaders) dofile(L *glua.LState) int {
	ld.check(L, "dofile")
	name, ok := L.Get(1).(glua.LString)
	if !ok {
		L.ArgError(1, "string expected, got "+L.Get(1).Type().String())
	}
	p, err := ld.f.load(string(name))
	if err != nil {
		L.RaiseError("%s", err.Error())
	}
	top := L.GetTop()
	L.Push(L.NewFunctionFromProto(p))
	L.Call(0, glua.MultRet)
	return L.GetTop() - top
}

// loadfile is loadfile(path): the function, or nil and a message.
func (ld *loaders) loadfile(L *glua.LState) int {
	ld.check(L, "loadfile")
	name := L.CheckString(1)
	p, err := ld.f.load(name)
	if err != nil {
		L.Push(glua.LNil)
		L.Push(glua.LString(err.Error()))
		return 2
	}
	L.Push(L.NewFunctionFromProto(p))
	return 1
}

// require is require(name).
func (ld *loaders) require(L *glua.LState) int {
	ld.check(L, "require")
	name := L.CheckString(1)
	if v, ok := ld.loaded[name]; ok {
		L.Push(v)
		return 1
	}
	if ld.busy[name] {
		L.RaiseError("loop or previous error loading module '%s'", name)
	}
	base := strings.ReplaceAll(name, ".", "/")
	var p *glua.FunctionProto
	var err error
	for _, try := range []string{base + ".lua", base + "/init.lua"} {
		if p, err = ld.f.load(try); !errors.Is(err, errNoFile) {
			break
		}
	}
	if errors.Is(err, errNoFile) {
		L.RaiseError("module '%s' not found: no file %s.lua or %s/init.lua in %s", name, base, base, ld.f.dir)
	}
	if err != nil {
		L.RaiseError("error loading module '%s': %s", name, err.Error())
	}
	ld.busy[name] = true
	defer delete(ld.busy, name)
	top := L.GetTop()
	L.Push(L.NewFunctionFromProto(p))
	L.Push(glua.LString(name))
	L.Call(1, 1)
	v := L.Get(top + 1)
	if v == glua.LNil {
		v = glua.LTrue
	}
	ld.loaded[name] = v
	L.SetTop(top)
	L.Push(v)
	return 1
}
