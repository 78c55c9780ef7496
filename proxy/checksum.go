package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"shardproxy/config"
)

// Checksum identifies a configuration by its pools' checksums and its
// admin section: what the proxy shows of the configuration it runs, and
// what a fleet shows of the version as published (before each proxy's own
// changes to it: resolved servers, a listen host).
func Checksum(cfg *config.Config) string {
	h := sha256.New()
	for _, p := range cfg.Pools {
		h.Write([]byte(p.Checksum()))
	}
	fmt.Fprintf(h, "%q %q %q %+v\n", cfg.Admin.StatsListen, cfg.Admin.HTTPListen, cfg.Admin.Token, cfg.Admin.Traces)
	return hex.EncodeToString(h.Sum(nil))
}
