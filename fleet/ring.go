package fleet

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Eject is the fleet's ring rule for one pool: the servers more than half
// of the live proxies report failing, sorted. reports maps a server to the
// proxies that report it; a report of a proxy that is not live (its
// registration gone) does not count. With no live proxy nothing is ejected.
func Eject(live map[string]bool, reports map[string]map[string]bool) []string {
	ejected := []string{}
	if len(live) == 0 {
		return ejected
	}
	for server, ids := range reports {
		n := 0
		for id := range ids {
			if live[id] {
				n++
			}
		}
		if 2*n > len(live) {
			ejected = append(ejected, server)
		}
	}
	sort.Strings(ejected)
	return ejected
}

// ringValue is the JSON of P/ring/<pool>.
type ringValue struct {
	Version int64    `json:"version"`
	Ejected []string `json:"ejected"`
}

// parseRing reads a ring key's value; a value that is not a ring is
// refused whole.
func parseRing(b []byte) (Ring, error) {
	var v ringValue
	if err := json.Unmarshal(b, &v); err != nil {
		return Ring{}, fmt.Errorf("fleet: ring value: %w", err)
	}
	if v.Version < 1 {
		return Ring{}, fmt.Errorf("fleet: ring value: version %d, want 1 or more", v.Version)
	}
	ej := slices.Clone(v.Ejected)
	sort.Strings(ej)
	if ej == nil {
		ej = []string{}
	}
	return Ring{Version: v.Version, Ejected: slices.Compact(ej)}, nil
}

func encodeRing(r Ring) []byte {
	b, _ := json.Marshal(ringValue(r))
	return b
}

// healthValue is the JSON of P/health/<pool>/<server>/<id>.
type healthValue struct {
	Since string `json:"since"`
	Err   string `json:"err"`
}

// ringState is the fleet's rings as this proxy last read them from etcd.
type ringState struct {
	ring   Ring
	modRev int64 // of P/ring/<pool>; 0: no such key
	bad    bool  // the key holds no valid ring; ring is the last valid one
}

// view is what an Agent knows of the keys under P/proxies, P/health and
// P/ring, kept by its session's Get and watch.
type view struct {
	live    map[string]bool                       // proxy ids registered
	members map[string]map[string]string          // proxy id -> its pools' client addresses
	health  map[string]map[string]map[string]bool // pool -> server -> reporting ids
	rings   map[string]ringState                  // pool -> its ring key
}

func newView() *view {
	return &view{live: map[string]bool{}, members: map[string]map[string]string{}, health: map[string]map[string]map[string]bool{},
		rings: map[string]ringState{}}
}

// setHealth records (on) or forgets a report of id about pool's server.
func (v *view) setHealth(pool, server, id string, on bool) {
	servers := v.health[pool]
	if on {
		if servers == nil {
			servers = map[string]map[string]bool{}
			v.health[pool] = servers
		}
		if servers[server] == nil {
			servers[server] = map[string]bool{}
		}
		servers[server][id] = true
		return
	}
	delete(servers[server], id)
	if len(servers[server]) == 0 {
		delete(servers, server)
	}
	if len(servers) == 0 {
		delete(v.health, pool)
	}
}

// decider is the live proxy that writes the fleet's ring decisions: the
// one with the smallest id.
func (v *view) decider() string {
	first := ""
	for id := range v.live {
		if first == "" || id < first {
			first = id
		}
	}
	return first
}

// decisions returns the rings the rule wants that differ from those in
// etcd, each at its next version, with the ModRevision its write compares.
func (v *view) decisions() map[string]ringState {
	pools := map[string]bool{}
	for p := range v.health {
		pools[p] = true
	}
	for p := range v.rings {
		pools[p] = true
	}
	out := map[string]ringState{}
	for p := range pools {
		want := Eject(v.live, v.health[p])
		cur := v.rings[p]
		same := slices.Equal(want, cur.ring.Ejected) || (len(want) == 0 && len(cur.ring.Ejected) == 0)
		if !cur.bad && (same || cur.modRev == 0 && len(want) == 0) {
			continue
		}
		out[p] = ringState{ring: Ring{Version: cur.ring.Version + 1, Ejected: want}, modRev: cur.modRev}
	}
	return out
}

// keyParts splits a key under P/<dir>/ into its n parts; ok is false for
// a key of another shape.
func keyParts(key, dir string, n int) ([]string, bool) {
	rest, ok := strings.CutPrefix(key, dir)
	if !ok {
		return nil, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != n || slices.Contains(parts, "") {
		return nil, false
	}
	return parts, true
}
