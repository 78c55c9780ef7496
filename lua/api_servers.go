package lua

import glua "github.com/yuin/gopher-lua"

// Server is one server a Lua pool's servers_from resolved (Config.Servers),
// as mcp.servers() gives it to the route file.
type Server struct {
	// Name is the server's name: an SRV target, or "host:port" for an
	// address record (the host alone at port 11211).
	Name string
	// Host and Port are where it listens.
	Host string
	Port int
}

// servers is mcp.servers(), a shardproxy addition of the config stage: a
// list of the servers the pool's servers_from resolved, each a table
// {name = , host = , port = }, in name order; empty for a pool without
// servers_from. The route file makes its backends of them
// (mcp.backend(s.name, s.host, s.port)); when DNS changes, the proxy
// reloads the configuration and the route file runs again with the new
// list, as on any reload.
func (cs *configStage) servers(L *glua.LState) int {
	t := L.CreateTable(len(cs.r.cfg.Servers), 0)
	for _, s := range cs.r.cfg.Servers {
		e := L.CreateTable(0, 3)
		e.RawSetString("name", glua.LString(s.Name))
		e.RawSetString("host", glua.LString(s.Host))
		e.RawSetString("port", glua.LNumber(s.Port))
		t.Append(e)
	}
	L.Push(t)
	return 1
}
