-- V2 failover: ask the primary pool; when it has no good answer (a miss,
-- an error, or no answer at all because it is down), ask the secondary.
--
-- rctx:res_good(h) returns a handle's response only when it was "good":
-- the backend answered, without an error, and not with a miss (END, EN,
-- NF, ...). A set answered STORED is good.

function mcp_config_pools()
    local primary = mcp.backend("primary", "127.0.0.1", 11311)
    local secondary = mcp.backend("secondary", "127.0.0.1", 11312)
    return {
        primary = mcp.pool({ primary }),
        secondary = mcp.pool({ secondary }),
    }
end

local function failover_gen(rctx, h)
    return function(r)
        local res = rctx:enqueue_and_wait(r, h.primary)
        if rctx:res_good(h.primary) then
            return res
        end
        return rctx:enqueue_and_wait(r, h.secondary)
    end
end

function mcp_config_routes(pools)
    local fgen = mcp.funcgen_new()
    local h = {
        primary = fgen:new_handle(pools.primary),
        secondary = fgen:new_handle(pools.secondary),
    }
    fgen:ready({ n = "failover", f = failover_gen, a = h })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
