-- V2 rate limits: token buckets in front of a pool.
--
-- Writes share one bucket across the whole proxy (mcp.ratelim_global_tbf,
-- made at config time and handed to every worker); reads have a bucket
-- per worker (mcp.ratelim_tbf), so each worker thread, and the clients it
-- serves, is limited on its own. A bucket starts full with `limit`
-- tokens and gains `fillrate` tokens every `tickrate` milliseconds, up to
-- `limit`; lim(n) takes n tokens and returns true while the bucket holds
-- more than n, false (taking nothing) otherwise. A request over its limit
-- is answered without reaching the backend.
--
-- Run it: shardproxy with a pool "lua: examples/lua/v2_ratelim.lua".

function mcp_config_pools()
    local main = mcp.pool({ mcp.backend("main", "127.0.0.1", 11211) })
    -- 6 tokens, one more a minute: 5 writes now, then one a minute
    local writes = mcp.ratelim_global_tbf({ limit = 6, fillrate = 1, tickrate = 60000 })
    return { main = main, writes = writes }
end

local READS = {
    [mcp.CMD_GET] = true, [mcp.CMD_GETS] = true, [mcp.CMD_MG] = true,
}

function mcp_config_routes(c)
    -- 4 tokens for this worker, one more a minute: 3 reads now
    local reads = mcp.ratelim_tbf({ limit = 4, fillrate = 1, tickrate = 60000 })
    local writes = c.writes
    local fgen = mcp.funcgen_new()
    local main = fgen:new_handle(c.main)
    fgen:ready({
        n = "ratelim",
        f = function(rctx)
            return function(r)
                local lim = writes
                if READS[r:command()] then
                    lim = reads
                end
                if not lim(1) then
                    return "SERVER_ERROR slow down\r\n"
                end
                return rctx:enqueue_and_wait(r, main)
            end
        end,
    })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
