-- A route file as the memcached wiki's first proxy example wrote it for
-- 1.6.12-1.6.22 (V1 API): a few backends in one pool, handlers attached
-- per command, a main pool and a special pool for keys with a prefix.
--
--  * keys starting with "slow/" go to the "slow" pool, with its own
--    timeouts (table form of mcp.backend);
--  * gets, sets and deletes of other keys go to the main pool, hashed with
--    memcached's defaults (jump hash, XXH3) and a seed; a key like
--    "user:1234|#|profile" is hashed on "user:1234" only (a "stop" filter
--    on "|#|"), so all of a user's keys share a server;
--  * a miss on a get is logged with log_reqsample (errors only), and the
--    client gets the miss.

function mcp_config_pools(oldss)
    mcp.backend_connect_timeout(2)
    mcp.backend_read_timeout(1)
    mcp.backend_failure_limit(3)

    local b1 = mcp.backend('mc1', '127.0.0.1', 11411)
    local b2 = mcp.backend('mc2', '127.0.0.1', 11412)
    local b3 = mcp.backend('mc3', '127.0.0.1', 11413)
    local slow = mcp.backend({ label = 'slow1', host = '127.0.0.1', port = 11414,
        connecttimeout = 3, readtimeout = 2, retrytimeout = 5, failurelimit = 5,
        tcpkeepalive = true })

    local main = mcp.pool({b1, b2, b3}, { seed = "main",
        filter = "stop", filter_conf = "|#|" })
    local special = mcp.pool({slow})
    return { main = main, slow = special }
end

function mcp_config_routes(pools)
    local main = pools.main
    local slow = pools.slow

    local function route(r)
        local key = r:key()
        if string.find(key, "^slow/") then
            return slow(r)
        end
        return main(r)
    end

    mcp.attach(mcp.CMD_GET, function(r)
        local res = route(r)
        mcp.log_reqsample(500, 0, true, r, res, "get")
        return res
    end)
    mcp.attach(mcp.CMD_SET, route)
    mcp.attach(mcp.CMD_DELETE, route)
end
