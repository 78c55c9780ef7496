-- V2 inspectors and mutators: look into requests and rebuild them without
-- string handling in Lua. Inspectors and mutators are made once, at route
-- time, from a list of steps; calling one runs the compiled steps.
--
-- Keys are "tenant/name". Tenants a and b are served; any other gets
-- CLIENT_ERROR. An ms without a TTL (T flag) is stored with one hour; an
-- mg always asks the backend for the remaining TTL (t flag).
--
-- Run it: shardproxy with a pool "lua: examples/lua/v2_mutate.lua".

function mcp_config_pools()
    return { main = mcp.pool({ mcp.backend("main", "127.0.0.1", 11611) }) }
end

function mcp_config_routes(pools)
    -- the tenant is the key's first "/"-separated part, mapped to a number
    -- (nil for an unknown tenant)
    local tenant = mcp.req_inspector_new(
        { t = "sepkey", sep = "/", pos = 1, map = { a = 1, b = 2 } })
    -- whether the request carries a TTL
    local has_ttl = mcp.req_inspector_new({ t = "hasflag", flag = "T" })

    -- ms KEY LEN [F...] T3600, with the value of the request given as
    -- argument 1 (idx = 1)
    local ms_default_ttl = mcp.req_mutator_new(
        { t = "cmdset", cmd = "ms" },
        { t = "keycopy", idx = 1 },
        { t = "valcopy", idx = 1 },
        { t = "flagcopy", flag = "F", idx = 1 }, -- writes nothing if absent
        { t = "flagset", flag = "T", val = 3600 })
    -- mg KEY [v] [f] [O...] t
    local mg_with_ttl = mcp.req_mutator_new(
        { t = "cmdset", cmd = "mg" },
        { t = "keycopy", idx = 1 },
        { t = "flagcopy", flag = "v", idx = 1 },
        { t = "flagcopy", flag = "f", idx = 1 },
        { t = "flagcopy", flag = "O", idx = 1 },
        { t = "flagset", flag = "t" })
    -- the answer to an unknown tenant
    local deny = mcp.res_mutator_new(
        { t = "reserr", code = "client", msg = "unknown tenant" })

    local fgen = mcp.funcgen_new()
    local main = fgen:new_handle(pools.main)
    fgen:ready({
        n = "mutate",
        u = 2, -- this generator's contexts each make two objects
        f = function(rctx)
            -- made once per request context and reused by its requests
            local nreq = rctx:request_new()
            local nres = rctx:response_new()
            return function(r)
                if tenant(r) == nil then
                    deny(nres)
                    return nres
                end
                local cmd = r:command()
                if cmd == mcp.CMD_MS and not has_ttl(r) then
                    ms_default_ttl(nreq, r)
                    return rctx:enqueue_and_wait(nreq, main)
                elseif cmd == mcp.CMD_MG then
                    mg_with_ttl(nreq, r)
                    return rctx:enqueue_and_wait(nreq, main)
                end
                return rctx:enqueue_and_wait(r, main)
            end
        end,
    })
    mcp.attach(mcp.CMD_ANY_STORAGE, fgen)
end
