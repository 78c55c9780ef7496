-- memcached proxy's V2 API: function generators, request contexts and a
-- router. The part of the key before the first "/" picks the route:
-- "session/..." keys live on their own server, anything else is sharded
-- over the other two.

function mcp_config_pools()
    return {
        sessions = mcp.pool({ mcp.backend("s1", "127.0.0.1", 22121) }),
        main = mcp.pool({
            mcp.backend("m1", "127.0.0.1", 22122),
            mcp.backend("m2", "127.0.0.1", 22123),
        }),
    }
end

-- direct returns a generator that sends each request to pool and answers
-- with its reply. The generator runs once per request context; the
-- function it returns handles one request at a time.
local function direct(pool, name)
    local fgen = mcp.funcgen_new()
    local handle = fgen:new_handle(pool)
    fgen:ready({ n = name, a = handle, f = function(rctx, h)
        return function(r)
            return rctx:enqueue_and_wait(r, h)
        end
    end })
    return fgen
end

function mcp_config_routes(pools)
    local router = mcp.router_new({
        map = { session = direct(pools.sessions, "sessions") },
        mode = "prefix",
        stop = "/",
        default = direct(pools.main, "main"),
    })
    mcp.attach(mcp.CMD_ANY_STORAGE, router)
end
