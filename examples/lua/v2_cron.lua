-- V2 with a cron job: every second, a function reads the server's
-- statistics and logs a line (mcp.log) with them and its run count.
--
-- memcached runs a cron in its configuration state. shardproxy runs it in
-- the state of its first Lua worker, between that worker's requests: the
-- function may read and set that worker's globals, and a local it closes
-- over (a table, a string, a number) is a copy made when the file loaded.
--
-- Run it: shardproxy with a pool "lua: examples/lua/v2_cron.lua".

function mcp_config_pools()
    local state = { runs = 0 }
    mcp.register_cron("health", {
        every = 1, -- seconds
        func = function()
            local s = mcp.server_stats()
            state.runs = state.runs + 1
            mcp.log("cron: run " .. state.runs .. ", pid " .. s.pid)
        end,
    })
    return { main = mcp.pool({ mcp.backend("main", "127.0.0.1", 11211) }) }
end

function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local h = fgen:new_handle(pools.main)
    fgen:ready({ n = "direct", a = h, f = function(rctx, h)
        return function(r) return rctx:enqueue_and_wait(r, h) end
    end })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
