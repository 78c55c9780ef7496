package proxy

import (
	"shardproxy/codec"
	"shardproxy/config"
	"shardproxy/lua"
)

// luaRouter adapts a *lua.Router to the pool's router interface.
type luaRouter struct{ *lua.Router }

// Route implements router.
func (r luaRouter) Route(req *codec.Request, hint uint32, c Completion) {
	r.Router.Route(req, hint, c)
}

// newLuaRouter builds the router of a Lua pool from its route file.
//
// The pool's YAML sets the defaults of the backends the script makes,
// where it sets them at all (a value different from the YAML default):
// timeout (the read timeout), connect_timeout (which, absent, follows
// timeout), server_retry_timeout,
// server_failure_limit, server_connections and tcpkeepalive; preconnect
// dials the backends at start. Everything else starts from memcached's
// proxy defaults, and the script's mcp.backend_* calls and backend options
// override both.
func newLuaRouter(p *pool) (router, error) {
	pc := p.cfg
	d := lua.Defaults{
		ReadTimeout:  pc.Timeout,
		TCPKeepalive: pc.TCPKeepalive,
	}
	if pc.ConnectTimeout > 0 && pc.ConnectTimeout != config.DefaultConnectTimeout {
		d.ConnectTimeout = pc.ConnectTimeout
	}
	if pc.ServerRetryTimeout > 0 && pc.ServerRetryTimeout != config.DefaultServerRetryTimeout {
		d.RetryTimeout = pc.ServerRetryTimeout
	}
	if pc.ServerFailureLimit > 0 && pc.ServerFailureLimit != config.DefaultServerFailureLimit {
		d.FailureLimit = pc.ServerFailureLimit
	}
	if pc.ServerConnections > 1 {
		d.Conns = pc.ServerConnections
	}
	r, err := lua.New(lua.Config{
		Path:       luaPath(p),
		Dialect:    p.dialect,
		Redis:      pc.Redis,
		Options:    p.limits,
		Handshake:  codec.HandshakeOptions{Password: pc.RedisAuth, Username: pc.RedisAuthUser, DB: pc.RedisDB},
		Defaults:   d,
		Preconnect: pc.Preconnect,
		Logger:     p.log,
	})
	if err != nil {
		return nil, err
	}
	return luaRouter{r}, nil
}

// luaPath resolves the pool's route file: a relative path is relative to
// the config file's directory.
func luaPath(p *pool) string { return p.src.Path(p.cfg.Lua) }
