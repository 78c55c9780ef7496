-- Prefix router: the first path element of a key picks the pool.
--   /users/...     -> the users pool (two servers, sharded)
--   /sessions/...  -> the sessions pool (one server)
--   anything else  -> the default pool (one server)
-- A key with an unknown prefix, like /other/x, goes to the default pool.

function mcp_config_pools()
    return {
        users = mcp.pool({
            mcp.backend("users1", "127.0.0.1", 11411),
            mcp.backend("users2", "127.0.0.1", 11412),
        }),
        sessions = mcp.pool({ mcp.backend("sessions", "127.0.0.1", 11413) }),
        default = mcp.pool({ mcp.backend("default", "127.0.0.1", 11414) }),
    }
end

function mcp_config_routes(pools)
    local routes = { users = pools.users, sessions = pools.sessions }
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        local prefix = string.match(r:key(), "^/([^/]+)/")
        local pool = routes[prefix] or pools.default
        return pool(r)
    end)
end
