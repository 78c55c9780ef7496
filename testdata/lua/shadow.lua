-- Shadow traffic: every request is answered by the main pool, and a copy
-- of it is sent to the shadow pool in the background (for example a new
-- cluster being load-tested). The client never waits for the shadow and
-- never sees its answers or its failures: a slow or dead shadow changes
-- nothing for clients.

function mcp_config_pools()
    return {
        main = mcp.pool({ mcp.backend("main", "127.0.0.1", 11411) }),
        shadow = mcp.pool({ mcp.backend({ label = "shadow", host = "127.0.0.1", port = 11412,
            readtimeout = 1, connecttimeout = 1 }) }),
    }
end

function mcp_config_routes(p)
    local shadow = { p.shadow }
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        mcp.await(r, shadow, 0, mcp.AWAIT_BACKGROUND)
        return p.main(r)
    end)
end
