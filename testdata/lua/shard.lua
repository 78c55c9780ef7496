-- Plain shard: three memcached servers behind one pool. Every key command
-- (get, set, delete, meta commands, ...) goes to the server that owns its
-- key; each key lives on exactly one server, and the keys spread over all
-- three. Placement is memcached's proxy default: jump hash over XXH3.
--
-- Use it from a pool in the YAML:
--   cache:
--     listen: 127.0.0.1:22122
--     lua: shard.lua

function mcp_config_pools()
    mcp.backend_read_timeout(0.5)
    return mcp.pool({
        mcp.backend("mc1", "127.0.0.1", 11411),
        mcp.backend("mc2", "127.0.0.1", 11412),
        mcp.backend("mc3", "127.0.0.1", 11413),
    })
end

function mcp_config_routes(pool)
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        return pool(r)
    end)
end
