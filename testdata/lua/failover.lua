-- Failover: requests go to the primary pool. When the primary fails (an
-- error: down, timing out, refusing), the same request goes to the
-- secondary pool and its answer is returned. A miss on the primary is an
-- answer, not a failure: it is returned as it is.

function mcp_config_pools()
    mcp.backend_read_timeout(0.5)
    mcp.backend_failure_limit(2)
    mcp.backend_retry_timeout(1)
    return {
        primary = mcp.pool({ mcp.backend("primary", "127.0.0.1", 11411) }),
        secondary = mcp.pool({ mcp.backend("secondary", "127.0.0.1", 11412) }),
    }
end

function mcp_config_routes(p)
    mcp.attach(mcp.CMD_ANY_STORAGE, function(r)
        local res = p.primary(r)
        if res:ok() then
            return res
        end
        return p.secondary(r)
    end)
end
