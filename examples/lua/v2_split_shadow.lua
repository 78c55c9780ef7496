-- V2 split with a shadow pool: every request is answered by the main
-- pool; writes are also copied to a shadow pool (a new cluster being
-- warmed, a test bed), whose answers the client never sees and does not
-- wait for.
--
-- Run it: shardproxy with a pool "lua: examples/lua/v2_split_shadow.lua".

function mcp_config_pools()
    return {
        main = mcp.pool({ mcp.backend("main", "127.0.0.1", 11211) }),
        shadow = mcp.pool({ mcp.backend("shadow", "127.0.0.1", 11212) }),
    }
end

local WRITES = {
    [mcp.CMD_SET] = true, [mcp.CMD_ADD] = true, [mcp.CMD_REPLACE] = true,
    [mcp.CMD_APPEND] = true, [mcp.CMD_PREPEND] = true, [mcp.CMD_CAS] = true,
    [mcp.CMD_DELETE] = true, [mcp.CMD_INCR] = true, [mcp.CMD_DECR] = true,
    [mcp.CMD_TOUCH] = true, [mcp.CMD_MS] = true, [mcp.CMD_MD] = true,
    [mcp.CMD_MA] = true,
}

local function split_gen(rctx, h)
    return function(r)
        if WRITES[r:command()] then
            -- queued now, sent with the main request below; nobody waits
            -- for its answer
            rctx:enqueue(r, h.shadow)
        end
        return rctx:enqueue_and_wait(r, h.main)
    end
end

function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local h = {
        main = fgen:new_handle(pools.main),
        shadow = fgen:new_handle(pools.shadow),
    }
    fgen:ready({ n = "split", f = split_gen, a = h })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
