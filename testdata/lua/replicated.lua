-- Replicated writes: every write (set, add, replace, append, prepend, cas,
-- delete, touch, incr, decr, ms, md, ma) goes to all three replicas at
-- once with mcp.await. The client is answered as soon as two replicas
-- (a majority) have answered without error, with one of their answers (the
-- third replica still gets the write); if that cannot happen, with an
-- error. So a write survives one replica being down. Reads (get, gets, mg)
-- go to the first replica and fail over to the next on a miss or an error.

local REPLICAS_NEEDED <const> = 2

function mcp_config_pools()
    return {
        mcp.pool({ mcp.backend("r1", "127.0.0.1", 11411) }),
        mcp.pool({ mcp.backend("r2", "127.0.0.1", 11412) }),
        mcp.pool({ mcp.backend("r3", "127.0.0.1", 11413) }),
    }
end

function mcp_config_routes(replicas)
    local function write(r)
        local results = mcp.await(r, replicas, REPLICAS_NEEDED, mcp.AWAIT_OK)
        local good, first_good, first_bad = 0, nil, nil
        for _, res in ipairs(results) do
            if res:ok() then
                good = good + 1
                first_good = first_good or res
            else
                first_bad = first_bad or res
            end
        end
        if good >= REPLICAS_NEEDED then
            return first_good
        end
        return first_bad
    end

    local function read(r)
        local res
        for _, replica in ipairs(replicas) do
            res = replica(r)
            if res:hit() then
                return res
            end
        end
        return res
    end

    mcp.attach(mcp.CMD_ANY_STORAGE, write)
    for _, cmd in ipairs({ mcp.CMD_GET, mcp.CMD_GETS, mcp.CMD_MG }) do
        mcp.attach(cmd, read)
    end
end
