-- memcached proxy's V1 API: pools are called as functions.
-- Keys that start with "session/" live on their own server; every other
-- key is sharded over the other two (jump hash over XXH3, memcached's
-- default).

function mcp_config_pools()
    local sessions = mcp.pool({ mcp.backend("s1", "127.0.0.1", 22121) })
    local main = mcp.pool({
        mcp.backend("m1", "127.0.0.1", 22122),
        mcp.backend("m2", "127.0.0.1", 22123),
    })
    return { sessions = sessions, main = main }
end

function mcp_config_routes(pools)
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        if string.find(r:key(), "session/", 1, true) == 1 then
            return pools.sessions(r)
        end
        return pools.main(r)
    end)
end
