package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"shardproxy/config"
)

// checksum identifies a configuration by its pools' checksums and its
// admin section.
func checksum(cfg *config.Config) string {
	h := sha256.New()
	for _, p := range cfg.Pools {
		h.Write([]byte(p.Checksum()))
	}
	fmt.Fprintf(h, "%q %q %q\n", cfg.Admin.StatsListen, cfg.Admin.HTTPListen, cfg.Admin.Token)
	return hex.EncodeToString(h.Sum(nil))
}
