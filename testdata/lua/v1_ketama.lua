-- A route file from a migration off twemproxy onto memcached 1.6.x's proxy
-- (V1 API). It keeps twemproxy's key placement, so the warm caches stay
-- warm: a ketama ring in twemproxy mode with md5 key hashing
-- (mcp.dist_ring_hash, omode "twemproxy", hash = mcp.dist_ring_hash.hash).
-- On top:
--  * TTLs longer than a day are capped at a day: the exptime token of
--    set/add/replace is rewritten with r:token;
--  * meta gets: a request with the "k" flag (return the key) is answered
--    as it is; "N" (vivify on miss) is refused by the proxy with an error;
--  * every error response is logged with mcp.log_req.

local MAX_TTL = 86400

function mcp_config_pools()
    local hosts = { 11411, 11412, 11413 }
    local backends = {}
    for i, port in ipairs(hosts) do
        backends[i] = mcp.backend("ketama" .. i, "127.0.0.1", port)
    end
    return mcp.pool(backends, {
        dist = mcp.dist_ring_hash,
        omode = "twemproxy",
        hash = mcp.dist_ring_hash.hash,
    })
end

function mcp_config_routes(pool)
    local function capped(r)
        local ttl = tonumber(r:token(4))
        if ttl ~= nil and ttl > MAX_TTL then
            r:token(4, tostring(MAX_TTL))
        end
        local res = pool(r)
        if not res:ok() then
            mcp.log_req(r, res, "write failed")
        end
        return res
    end

    mcp.attach(mcp.CMD_SET, capped)
    mcp.attach(mcp.CMD_ADD, capped)
    mcp.attach(mcp.CMD_REPLACE, capped)

    mcp.attach(mcp.CMD_MG, function(r)
        if r:has_flag("N") then
            return "CLIENT_ERROR vivify not allowed through this proxy\r\n"
        end
        local res = pool(r)
        if not res:ok() then
            mcp.log_req(r, res, "mg failed")
        end
        return res
    end)

    mcp.attach(mcp.CMD_GET, function(r) return pool(r) end)
    mcp.attach(mcp.CMD_DELETE, function(r) return pool(r) end)
end
