-- V2 replication over two pools: writes go to both and wait for both;
-- reads go to both and answer with the first good (hit) response, or, when
-- neither has the key, whatever came back.

function mcp_config_pools()
    local a = mcp.backend("a", "127.0.0.1", 11411)
    local b = mcp.backend("b", "127.0.0.1", 11412)
    return { a = mcp.pool({ a }), b = mcp.pool({ b }) }
end

-- all_gen: send to every handle, wait for all of them (WAIT_ANY counts any
-- answer, errors too), and return the first handle's response.
local function all_gen(rctx, handles)
    return function(r)
        rctx:enqueue(r, handles) -- queue only: sent at the next wait
        rctx:wait_cond(#handles, mcp.WAIT_ANY)
        return rctx:res_any(handles[1])
    end
end

-- fastest_gen: send to every handle and wait for the first good answer.
-- wait_cond returns how many handles satisfied the mode; it also returns
-- when every call has come back without one.
local function fastest_gen(rctx, handles)
    return function(r)
        rctx:enqueue(r, handles)
        local done = rctx:wait_cond(1, mcp.WAIT_GOOD)
        if done == 1 then
            for _, h in ipairs(handles) do
                local res = rctx:res_good(h)
                if res then
                    return res
                end
            end
        end
        -- no hit anywhere: the best of what came back (a miss before an error)
        return rctx:best_result(handles)
    end
end

function mcp_config_routes(pools)
    local reads = mcp.funcgen_new()
    local writes = mcp.funcgen_new()
    local rh = { reads:new_handle(pools.a), reads:new_handle(pools.b) }
    local wh = { writes:new_handle(pools.a), writes:new_handle(pools.b) }
    reads:ready({ n = "fastest", f = fastest_gen, a = rh })
    writes:ready({ n = "all", f = all_gen, a = wh })

    mcp.attach(mcp.CMD_ANY_STORAGE, writes)
    mcp.attach(mcp.CMD_GET, reads)
    mcp.attach(mcp.CMD_MG, reads)
end
