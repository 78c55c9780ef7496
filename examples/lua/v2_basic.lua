-- V2 basic route: every key command goes to one pool, through a function
-- generator. The generator runs once per request context (memcached keeps
-- a pool of them); the function it returns handles one request at a time.
--
-- Run it: shardproxy with a pool "lua: examples/lua/v2_basic.lua".

function mcp_config_pools()
    local main = mcp.backend("main", "127.0.0.1", 11211)
    return { main = mcp.pool({ main }) }
end

-- direct_gen is called with a fresh request context and the generator's
-- argument (here the handle of the pool) and returns the request handler.
local function direct_gen(rctx, handle)
    return function(r)
        -- send r to the pool's backend for its key and wait for the answer
        return rctx:enqueue_and_wait(r, handle)
    end
end

function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local handle = fgen:new_handle(pools.main) -- handles are numbered from 0
    fgen:ready({ n = "direct", f = direct_gen, a = handle })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
