package proxy

import "errors"

// newLuaRouter builds the router of a Lua pool from its route file.
func newLuaRouter(p *pool) (router, error) {
	return nil, errors.New("Lua route files are not supported by this build yet")
}
