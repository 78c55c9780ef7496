-- A routelib configuration (memcached: memcached -o
-- proxy_config=routelib.lua,proxy_arg=routes.lua). Keys are routed by
-- the part before the first "/": "session/..." keys are written to two
-- pools and read from the first that has them; anything else goes to the
-- main pool.

pools{
    main = { backends = { "127.0.0.1:22121", "127.0.0.1:22122" } },
    sessions_a = { backends = { "127.0.0.1:22123" } },
    sessions_b = { backends = { "127.0.0.1:22124" } },
}

routes{
    map = {
        session = cmdmap{
            -- writes wait for both copies
            set = route_allsync{ children = { "sessions_a", "sessions_b" } },
            -- reads: a miss in sessions_a is tried in sessions_b
            get = route_failover{ children = { "sessions_a", "sessions_b" }, miss = true },
        },
    },
    default = route_direct{ child = "main" },
}
