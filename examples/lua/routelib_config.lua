-- A configuration for memcached's route library, routelib: shardproxy runs
-- it unchanged, as memcached's proxy does. routelib.lua is the route file
-- and this file its argument:
--
--   pools:
--     cache:
--       listen: 127.0.0.1:22122
--       lua: /path/to/routelib.lua          # from memcached's source:
--                                           # vendor/routelib/routelib.lua
--       lua_arg: examples/lua/routelib_config.lua
--
-- (memcached: memcached -o proxy_config=routelib,proxy_arg=THIS_FILE).
-- routelib loads this file with dofile; pools{}, routes{} and the route_*
-- constructors are routelib's. Keys are routed by the part before the
-- first "/" (the map below); anything else takes the default route.

-- this proxy's zone, for the zone-aware routes
local_zone("z1")

pools{
    main = { backends = { "127.0.0.1:11211" } },
    shadow = { backends = { "127.0.0.1:11212" } },
    -- nothing listens here: a dead server
    dead = { backends = { "127.0.0.1:11219" } },
    -- a pool set: one pool per zone
    set_zones = {
        z1 = { backends = { "127.0.0.1:11213" } },
        z2 = { backends = { "127.0.0.1:11214" } },
    },
}

routes{
    map = {
        -- one pool
        direct = route_direct{ child = "main" },
        -- the first child that answers (dead is tried first, then main)
        failover = route_failover{ children = { "dead", "main" } },
        -- every child gets the request; the first good answer wins
        fastest = route_allfastest{ children = { "main", "shadow" } },
        -- every child gets the request; all answers are waited for
        sync = route_allsync{ children = { "main", "shadow" } },
        -- answered by child_a; a copy goes to child_b, not waited for
        split = route_split{ child_a = "main", child_b = "shadow" },
        -- the local zone's pool first, then the others on a miss
        zone = route_zfailover{ children = "set_zones" },
        -- sets with a fixed TTL (60 seconds)
        ttl = route_ttl{ ttl = 60, child = "main" },
        -- one of the children, at random
        random = route_random{ children = { "main", "shadow" } },
        -- answers every request with an empty reply ("HD", "NF", "EN" ...)
        null = route_null{},
        -- 3 tokens, 1 more a minute: each worker serves 2 requests now,
        -- then answers as route_null does
        limited = route_ratelim{ child = "main", limit = 3, fillrate = 1, tickrate = 60000 },
        -- the same, one bucket for the whole proxy
        glimited = route_ratelim{ child = "main", limit = 3, fillrate = 1, tickrate = 60000, global = true },
        -- inverted: route_null's answer until the bucket is empty
        inverted = route_ratelim{ child = "main", limit = 3, fillrate = 1, tickrate = 60000, fail_until_limit = true },
        -- routes nest: a failover whose children are routes
        nested = route_failover{ children = {
            route_direct{ child = "dead" },
            route_split{ child_a = "main", child_b = "shadow" },
        } },
    },
    default = route_direct{ child = "main" },
}
