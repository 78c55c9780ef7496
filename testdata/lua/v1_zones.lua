-- A route file in the style of memcached 1.6.x's example proxy config
-- (t/startfile.lua, the V1 API: pools called as functions, mcp.await). It
-- is kept exactly as memcached 1.6.12-1.6.22 would run it.
--
-- Three zones, one pool each; this proxy sits in zone z1.
--  * /foo/ keys: reads from the local zone; on a miss or an error the far
--    zones are asked at once and the first hit wins (AWAIT_GOOD, 1).
--    Writes go to every zone and are answered with the local zone's result.
--  * /bar/ keys: the local zone only.
--  * anything else: "SERVER_ERROR no route".
-- A counter of far-zone lookups is kept with mcp.add_stat / mcp.stat.

local my_zone = 'z1'

local STAT_FAR_LOOKUP <const> = 1
local STAT_WRITES <const> = 2
mcp.tcp_keepalive(false)

function mcp_config_pools(oldss)
    mcp.add_stat(STAT_FAR_LOOKUP, "far_lookup")
    mcp.add_stat(STAT_WRITES, "writes")
    mcp.backend_connect_timeout(5.5) -- 5 and a half second timeout.
    mcp.backend_read_timeout(0.5)
    mcp.backend_retry_timeout(3)
    local srv = mcp.backend

    -- one backend per zone keeps the example small.
    local b1 = srv('b1', '127.0.0.1', 11411)
    local b2 = srv('b2', '127.0.0.1', 11412)
    local b3 = srv('b3', '127.0.0.1', 11413)

    local zones = {
        z1 = mcp.pool({b1}),
        z2 = mcp.pool({b2}),
        z3 = mcp.pool({b3}),
    }
    return zones
end

-- WORKER CODE:

function prefix_factory(pattern, list, default)
    local p = pattern
    local l = list
    local d = default
    return function(r)
        local route = l[string.match(r:key(), p)]
        if route == nil then
            return d(r)
        end
        return route(r)
    end
end

function meta_get_factory(zones, local_zone)
    local near_zone = zones[local_zone]
    local far_zones = {}
    for k, v in pairs(zones) do
        if k ~= local_zone then
            table.insert(far_zones, v)
        end
    end

    return function(r)
        local res = near_zone(r)
        if res:hit() == false then
            mcp.stat(STAT_FAR_LOOKUP, 1)
            local restable = mcp.await(r, far_zones, 1)
            for idx, res in pairs(restable) do
                if res:hit() then
                    return res
                end
            end
        end
        return res
    end
end

function setinvalidate_factory(zones, local_zone)
    local near_zone = zones[local_zone]
    local far_zones = {}
    for k, v in pairs(zones) do
        if k ~= local_zone then
            far_zones[k] = v
        end
    end
    local new_req = mcp.request
    return function(r)
        mcp.stat(STAT_WRITES, 1)
        local res = near_zone(r)
        if res:code() == mcp.MCMC_CODE_STORED then
            -- the far zones get the write too; we do not wait for them.
            mcp.await(r, far_zones, 0, mcp.AWAIT_BACKGROUND)
        end
        return res
    end
end

function mcp_config_routes(zones)
    local local_zone = zones[my_zone]

    local pfx_get = {}
    local pfx_set = {}
    local pfx_touch = {}

    pfx_get["foo"] = meta_get_factory(zones, my_zone)
    pfx_get["bar"] = function(r) return local_zone(r) end
    pfx_set["foo"] = setinvalidate_factory(zones, my_zone)
    pfx_set["bar"] = function(r) return local_zone(r) end
    pfx_touch["foo"] = function(r) return local_zone(r) end
    pfx_touch["bar"] = function(r) return local_zone(r) end

    local default = function(r) return "SERVER_ERROR no route\r\n" end
    mcp.attach(mcp.CMD_GET, prefix_factory("^/(%a+)/", pfx_get, default))
    mcp.attach(mcp.CMD_SET, prefix_factory("^/(%a+)/", pfx_set, default))
    mcp.attach(mcp.CMD_TOUCH, prefix_factory("^/(%a+)/", pfx_touch, default))
end
