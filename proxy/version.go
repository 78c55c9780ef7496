package proxy

import (
	"cmp"

	"shardproxy/config"
)

// ServerVersion implements codec.VersionEnv: what a memcache client
// reading "version" is told about the servers behind the pool. It is the
// lowest version the pool's servers told when their sockets were
// validated, so that a client deciding on features asks for none that one
// of the servers lacks; before any has told it, the pool's
// default_version.
func (p *pool) ServerVersion() string {
	low := ""
	for _, b := range p.router.Backends() {
		if v := b.Version(); v != "" && (low == "" || compareVersions(v, low) < 0) {
			low = v
		}
	}
	if low == "" {
		return cmp.Or(p.cfg.DefaultVersion, config.DefaultVersion)
	}
	return low
}

// compareVersions orders two versions as memcached's clients read them:
// by their dot-separated numbers ("1.6.9" < "1.6.18"), a missing number
// as 0, then by the text after the numbers ("1.6.18" < "1.6.18-rc1"), so
// that the order is total.
func compareVersions(a, b string) int {
	for a != "" || b != "" {
		na, ra, okA := leadingNumber(a)
		nb, rb, okB := leadingNumber(b)
		if !okA || !okB {
			return cmp.Compare(a, b)
		}
		if c := cmp.Compare(na, nb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
	return 0
}

// leadingNumber reads the number at the start of s and skips the dot
// after it. ok is false when s starts with anything but a digit (s empty
// reads as 0). Numbers stop growing at 1e9: no version is that big.
func leadingNumber(s string) (n int, rest string, ok bool) {
	if s == "" {
		return 0, "", true
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		if n < 1e9 {
			n = n*10 + int(s[i]-'0')
		}
		i++
	}
	if i == 0 {
		return 0, s, false
	}
	if i < len(s) && s[i] == '.' {
		i++
	}
	return n, s[i:], true
}
