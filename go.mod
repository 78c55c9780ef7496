module shardproxy

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/spaolacci/murmur3 v1.1.0
	gopkg.in/yaml.v3 v3.0.1
)
