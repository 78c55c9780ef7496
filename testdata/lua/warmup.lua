-- Warm-up: a new, cold pool replaces an old, warm one. Gets ask the new
-- pool first; on a miss they ask the old pool, and a hit there is copied
-- into the new pool (in the background: the client does not wait for the
-- copy) and returned. Writes go to the new pool only. After a key was read
-- once, the new pool has it.

function mcp_config_pools()
    return {
        new = mcp.pool({ mcp.backend("new", "127.0.0.1", 11411) }),
        old = mcp.pool({ mcp.backend("old", "127.0.0.1", 11412) }),
    }
end

function mcp_config_routes(p)
    -- Writes: the new pool only. (Attached first: the get handler below
    -- replaces this one for get.)
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        return p.new(r)
    end)

    mcp.attach(mcp.CMD_GET, function(r)
        local res = p.new(r)
        if res:hit() or not res:ok() then
            return res
        end
        local old = p.old(r)
        if old:hit() then
            local copy = mcp.request("set " .. r:key() .. " 0 0 " .. old:vlen() .. "\r\n", old)
            mcp.await(copy, { p.new }, 0, mcp.AWAIT_BACKGROUND)
        end
        return old
    end)
end
