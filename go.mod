module shardproxy

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/spaolacci/murmur3 v1.1.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/prometheus/client_golang v1.20.5 // indirect
	github.com/redis/go-redis/v9 v9.7.0 // indirect
	github.com/tidwall/btree v1.1.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/redcon v1.6.2 // indirect
	github.com/yuin/gopher-lua v1.1.2 // indirect
)
