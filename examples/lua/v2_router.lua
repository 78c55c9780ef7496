-- V2 routers: pick a function generator by a part of the key.
--
-- Text commands (get, set, delete, ...) use a prefix router: the part of
-- the key before the first "/" selects the map entry ("users/1" -> users),
-- and keys with no "/" or an unknown prefix go to the default.
--
-- Meta commands (mg, ms, md, ...) use an anchor router: the key must start
-- with "/", and the part up to the next "/" selects the entry
-- ("/users/1" -> users). It has no default, so any other key is answered
-- "SERVER_ERROR lua start failure".

function mcp_config_pools()
    local users = mcp.backend("users", "127.0.0.1", 11511)
    local items = mcp.backend("items", "127.0.0.1", 11512)
    return { users = mcp.pool({ users }), items = mcp.pool({ items }) }
end

-- direct builds a generator sending every request to one pool.
local function direct(pool, name)
    local fgen = mcp.funcgen_new()
    local h = fgen:new_handle(pool)
    fgen:ready({ n = name, f = function(rctx, h)
        return function(r)
            return rctx:enqueue_and_wait(r, h)
        end
    end, a = h })
    return fgen
end

-- message builds a generator answering every request with msg.
local function message(msg)
    local fgen = mcp.funcgen_new()
    fgen:ready({ n = "message", f = function(rctx)
        return function(r)
            return msg
        end
    end })
    return fgen
end

function mcp_config_routes(pools)
    local map = {
        users = direct(pools.users, "users"),
        items = direct(pools.items, "items"),
    }
    local prefix = mcp.router_new({
        map = map,
        mode = "prefix",
        stop = "/",
        default = message("SERVER_ERROR no route for this key\r\n"),
    })
    local anchor = mcp.router_new({ map = map, mode = "anchor", start = "/", stop = "/" })

    mcp.attach(mcp.CMD_ANY_STORAGE, prefix)
    mcp.attach(mcp.CMD_MG, anchor)
    mcp.attach(mcp.CMD_MS, anchor)
    mcp.attach(mcp.CMD_MD, anchor)
end
