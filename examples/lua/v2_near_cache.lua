-- A near cache: the proxy's own cache in front of a remote pool, for hot
-- keys read far more often than they change. mcp.internal(r) answers r
-- from the proxy's own cache at once, without waiting; the remote pool is
-- a V2 handle.
--
-- get: asked of the near cache first; on a miss, of the remote pool, and a
-- hit from there is copied into the near cache for NEAR_TTL seconds.
-- set, add, replace, append, prepend, cas, incr, decr, touch, delete: the
-- near copy is dropped, then the command goes to the remote pool.
-- Everything else goes to the remote pool.
--
-- The near cache sees only the writes that pass through this proxy: a
-- write made elsewhere (another proxy, a client talking to the servers)
-- shows here once the near copy has expired, at most NEAR_TTL seconds
-- later. A get that reached the remote pool before a write and returns
-- after it may copy the old value back: that too lasts NEAR_TTL at most.

local NEAR_TTL = 5

function mcp_config_pools()
    local remote = mcp.backend("remote", "127.0.0.1", 11611)
    return mcp.pool({ remote })
end

-- near_get answers a get from the near cache, else from the remote pool,
-- copying a remote hit into the near cache.
local function near_get(rctx, remote)
    return function(r)
        local res = mcp.internal(r)
        if res:hit() then
            return res
        end
        res = rctx:enqueue_and_wait(r, remote)
        if res:hit() then
            -- "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n"
            local raw = res:raw_string()
            local flags, len, data = string.match(raw, "^VALUE %S+ (%d+) (%d+)\r\n()")
            if flags then
                local value = string.sub(raw, data, data + tonumber(len) + 1)
                local fill = mcp.request("set " .. r:key() .. " " .. flags .. " " .. NEAR_TTL .. " " .. len .. "\r\n", value)
                mcp.internal(fill)
            end
        end
        return res
    end
end

-- write_through drops the near copy of the request's key, then sends the
-- request to the remote pool.
local function write_through(rctx, remote)
    return function(r)
        mcp.internal(mcp.request("delete " .. r:key() .. "\r\n"))
        return rctx:enqueue_and_wait(r, remote)
    end
end

-- forward sends every request to the remote pool.
local function forward(rctx, remote)
    return function(r)
        return rctx:enqueue_and_wait(r, remote)
    end
end

function mcp_config_routes(pool)
    local function gen(name, f)
        local fgen = mcp.funcgen_new()
        fgen:ready({ n = name, f = f, a = fgen:new_handle(pool) })
        return fgen
    end
    -- Every key command to the remote pool first (a command no handler
    -- takes would be answered from the near cache), then the overrides.
    mcp.attach(mcp.CMD_ANY_STORAGE, gen("forward", forward))
    mcp.attach(mcp.CMD_GET, gen("near_get", near_get))
    local writes = gen("write_through", write_through)
    for _, cmd in ipairs({ mcp.CMD_SET, mcp.CMD_ADD, mcp.CMD_REPLACE, mcp.CMD_APPEND, mcp.CMD_PREPEND,
        mcp.CMD_CAS, mcp.CMD_INCR, mcp.CMD_DECR, mcp.CMD_TOUCH, mcp.CMD_DELETE }) do
        mcp.attach(cmd, writes)
    end
end
