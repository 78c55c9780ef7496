-- More of routelib, memcached's route library (see routelib_config.lua
-- for how to run a routelib configuration): global settings, backends
-- with options, a router split on ":" with a command map, failover that
-- counts its retries, routes that treat a miss as a failure, the proxy's
-- own cache as a child.

settings{
    backend_connect_timeout = 2, -- seconds
    active_request_limit = 1000,
}

pools{
    -- a backend as a table: its options are mcp.backend's
    main = { backends = { { host = "127.0.0.1", port = 11211, label = "main1" } } },
    other = { backends = { "127.0.0.1:11212" } },
    dead = { backends = { "127.0.0.1:11219" } },
}

routes{
    -- handed to mcp.router_new: route keys end at the first ":"
    conf = { mode = "prefix", stop = ":" },
    map = {
        -- by command: reads from other, writes to main, the rest to default
        cm = cmdmap{
            get = route_direct{ child = "other" },
            mg = route_direct{ child = "other" },
            set = route_direct{ child = "main" },
        },
        -- dead first, then main; the retries show in the proxy's stats as
        -- user_retry_retries
        retry = route_failover{ children = { "dead", "main" }, stats = true, stats_name = "retry" },
        -- a miss in main is tried in other
        miss = route_failover{ children = { "main", "other" }, miss = true },
        -- both asked; a hit from either wins over a miss
        fastmiss = route_allfastest{ children = { "main", "other" }, miss = true },
        -- the proxy's own cache: keys that live in the proxy only
        ["local"] = route_direct{ child = "internal" },
    },
    -- no map entry: by command, then default
    cmap = { touch = route_direct{ child = "other" } },
    default = route_direct{ child = "main" },
}
