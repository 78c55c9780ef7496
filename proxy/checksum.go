package proxy

import (
	"crypto/sha256"
	"encoding/hex"

	"shardproxy/config"
)

// checksum identifies a configuration by its pools' checksums.
func checksum(cfg *config.Config) string {
	h := sha256.New()
	for _, p := range cfg.Pools {
		h.Write([]byte(p.Checksum()))
	}
	return hex.EncodeToString(h.Sum(nil))
}
