package resp

import (
	"math"
	"sort"
	"strconv"
	"strings"
)

// How INFO's sections are merged (mergeInfo): each field by a rule. The
// reference server is the one whose Server section has the lowest
// redis_version (the first such when several tie); when no reply has a
// Server section (INFO keyspace), the first server that answered. Its
// sections and fields come first, in its order; sections and fields only
// other servers have follow, in the order first seen.
//
// Per section (see sectionRules for the exceptions by field):
//   - Server: the reference server's, but uptime_in_seconds and
//     uptime_in_days are the lowest (the youngest server) and redis_mode
//     is "standalone": to its clients the proxy is one standalone server.
//   - Clients, Stats, CPU: summed; the largest recent client buffers and
//     latest_fork_usec are the largest.
//   - Memory: byte counts summed; maxmemory summed unless a server has no
//     limit (0), then 0; *_human recomputed from the summed bytes;
//     ratios and percentages the largest (the worst server's).
//   - Persistence, Replication: the reference server's, but loading and
//     every *_in_progress flag the largest (1 if any), every *_status
//     "ok" only if all are, change and save counts summed,
//     rdb_last_save_time the oldest, connected_slaves summed.
//   - Keyspace: per database, keys and expires summed, avg_ttl averaged
//     weighted by expires; databases in number order.
//   - Commandstats, Errorstats: per command or error, the counts summed
//     and usec_per_call recomputed from them.
//   - Latencystats: per command, each percentile the largest.
//   - Cluster: the reference server's, with cluster_enabled 0 (the proxy
//     is not a cluster node), or 1 on a pool with redis_cluster_view
//     (Request.ClusterView), which answers as one: redis-py's
//     RedisCluster asks INFO before CLUSTER SLOTS; Modules and any other
//     section: the reference server's lines as they are.
//
// A field a rule cannot combine (a value that is not a number where
// numbers are summed) is the reference server's.

// rule says how one field's values combine.
type rule uint8

const (
	ruleRef      rule = iota // the reference server's value
	ruleSum                  // numbers summed
	ruleMin                  // the smallest number
	ruleMax                  // the largest number
	ruleHuman                // the merged byte count of the field without "_human", as Redis writes it
	ruleLimit                // summed, but 0 (no limit) if any is 0
	ruleStatus               // "ok" if every server says so, else the first other value
	ruleSubSum               // "a=1,b=2": each sub-field summed (Keyspace, Commandstats, Errorstats)
	ruleSubMax               // "p50=1.0,p99=2.0": each sub-field the largest (Latencystats)
	ruleVerbatim             // the whole section: the reference server's lines as they are
)

// sectionRule is a section's default rule and its exceptions by field.
type sectionRule struct {
	def    rule
	fields map[string]rule
	set    map[string]string // fields the proxy answers itself
	sortDB bool              // lines are dbN: in number order
}

var sectionRules = map[string]sectionRule{
	"server": {def: ruleRef,
		fields: map[string]rule{"uptime_in_seconds": ruleMin, "uptime_in_days": ruleMin},
		set:    map[string]string{"redis_mode": "standalone"}},
	"clients": {def: ruleSum, fields: map[string]rule{
		"client_recent_max_input_buffer": ruleMax, "client_recent_max_output_buffer": ruleMax}},
	"memory": {def: ruleSum, fields: map[string]rule{"maxmemory": ruleLimit}},
	"persistence": {def: ruleRef, fields: map[string]rule{
		"loading": ruleMax, "async_loading": ruleMax,
		"rdb_changes_since_last_save": ruleSum, "rdb_saves": ruleSum, "aof_rewrites": ruleSum,
		"current_save_keys_processed": ruleSum, "current_save_keys_total": ruleSum,
		"rdb_last_save_time": ruleMin}},
	"stats":        {def: ruleSum, fields: map[string]rule{"latest_fork_usec": ruleMax}},
	"replication":  {def: ruleRef, fields: map[string]rule{"connected_slaves": ruleSum}},
	"cpu":          {def: ruleSum},
	"commandstats": {def: ruleSubSum},
	"errorstats":   {def: ruleSubSum},
	"latencystats": {def: ruleSubMax},
	"keyspace":     {def: ruleSubSum, sortDB: true},
	"cluster":      {def: ruleRef, set: map[string]string{"cluster_enabled": "0"}},
	"modules":      {def: ruleVerbatim},
}

// ruleOf returns the rule of field key in a section under sr.
func (sr sectionRule) ruleOf(key string) rule {
	if r, ok := sr.fields[key]; ok {
		return r
	}
	switch {
	case sr.def == ruleSubSum || sr.def == ruleSubMax:
		return sr.def
	case strings.HasSuffix(key, "_human"):
		return ruleHuman
	case strings.HasSuffix(key, "_ratio") || strings.HasSuffix(key, "_perc") ||
		strings.HasSuffix(key, "_in_progress"):
		return ruleMax
	case strings.HasSuffix(key, "_status"):
		return ruleStatus
	}
	return sr.def
}

// mergeSections merges the sections of every reply (at least one).
func mergeSections(got []infoReply) []infoSection {
	ref := referenceOf(got)
	order := []int{ref}
	for i := range got {
		if i != ref {
			order = append(order, i)
		}
	}
	var names []string // lower case, in order of first appearance
	byName := map[string][]*infoSection{}
	for _, i := range order {
		for j := range got[i].sections {
			s := &got[i].sections[j]
			n := strings.ToLower(s.name)
			if _, seen := byName[n]; !seen {
				names = append(names, n)
			}
			byName[n] = append(byName[n], s)
		}
	}
	out := make([]infoSection, 0, len(names))
	for _, n := range names {
		secs := byName[n]
		out = append(out, mergeSection(sectionRules[n], secs))
	}
	return out
}

// referenceOf returns the index of the reply with the lowest redis_version,
// or 0.
func referenceOf(got []infoReply) int {
	ref, low := 0, ""
	for i, r := range got {
		for _, s := range r.sections {
			if !strings.EqualFold(s.name, "server") {
				continue
			}
			for _, l := range s.lines {
				if l.key == "redis_version" && (low == "" || compareVersions(l.value, low) < 0) {
					ref, low = i, l.value
				}
			}
		}
	}
	return ref
}

// compareVersions compares dotted versions part by part, numerically
// where both parts are numbers.
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y string
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.ParseUint(x, 10, 64)
		ny, ey := strconv.ParseUint(y, 10, 64)
		switch {
		case ex == nil && ey == nil && nx != ny:
			if nx < ny {
				return -1
			}
			return 1
		case (ex != nil || ey != nil) && x != y:
			return strings.Compare(x, y)
		}
	}
	return 0
}

// mergeSection merges one section as the servers gave it, the reference
// server's first (when it has the section).
func mergeSection(sr sectionRule, secs []*infoSection) infoSection {
	out := infoSection{name: secs[0].name, header: secs[0].header}
	if sr.def == ruleVerbatim || (sr.def == ruleRef && sr.fields == nil && sr.set == nil) {
		out.lines = append(out.lines, secs[0].lines...)
		return out
	}
	// The maps are made here and filled by helpers that keep no reference
	// to them, so that they stay off the heap.
	values := map[string][]string{} // by key, one per server that has it, in server order
	colon := map[string]bool{}      // whether any server's line of the key is "key:value"
	keys := gatherFields(secs, values, colon)
	merged := make(map[string]string, len(keys))
	mergeFields(sr, keys, values, merged)
	if sr.sortDB {
		sort.SliceStable(keys, func(i, j int) bool { return dbLess(keys[i], keys[j]) })
	}
	for _, k := range keys {
		out.lines = append(out.lines, infoLine{key: k, value: merged[k], colon: colon[k]})
	}
	return out
}

// gatherFields collects the fields of one section's copies into values
// and colon, a server's first line of a key counting, its later ones not,
// and returns the keys in order of first appearance.
func gatherFields(secs []*infoSection, values map[string][]string, colon map[string]bool) []string {
	var keys []string
	for _, s := range secs {
		seen := map[string]bool{}
		for _, l := range s.lines {
			if seen[l.key] {
				continue // a server's second line of one key: its first counts
			}
			seen[l.key] = true
			if _, ok := values[l.key]; !ok {
				keys = append(keys, l.key)
			}
			values[l.key] = append(values[l.key], l.value)
			colon[l.key] = colon[l.key] || l.colon
		}
	}
	return keys
}

// mergeFields merges each field's values into merged by its rule: the
// human-readable ones after the others, from their merged numbers, and the
// section's fixed values last.
func mergeFields(sr sectionRule, keys []string, values map[string][]string, merged map[string]string) {
	for _, k := range keys {
		if r := sr.ruleOf(k); r != ruleHuman {
			merged[k] = combine(r, k, values[k])
		}
	}
	for _, k := range keys {
		if sr.ruleOf(k) == ruleHuman {
			merged[k] = human(merged, k, values[k])
		}
		if v, ok := sr.set[k]; ok {
			merged[k] = v
		}
	}
}

// dbLess orders "db2" before "db10"; other keys after the databases.
func dbLess(a, b string) bool {
	na, oka := dbNumber(a)
	nb, okb := dbNumber(b)
	switch {
	case oka && okb:
		return na < nb
	case oka != okb:
		return oka
	}
	return false
}

func dbNumber(key string) (uint64, bool) {
	if !strings.HasPrefix(key, "db") {
		return 0, false
	}
	n, err := strconv.ParseUint(key[2:], 10, 32)
	return n, err == nil
}

// combine merges one field's values (vs[0] the reference server's, when
// it has the field) by rule r.
func combine(r rule, key string, vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	switch r {
	case ruleSum:
		if v, ok := sumValues(vs); ok {
			return v
		}
	case ruleMin, ruleMax:
		if v, ok := pickValue(vs, r == ruleMax); ok {
			return v
		}
	case ruleLimit:
		for _, v := range vs {
			if v == "0" {
				return v
			}
		}
		if v, ok := sumValues(vs); ok {
			return v
		}
	case ruleStatus:
		for _, v := range vs {
			if v != "ok" {
				return v
			}
		}
	case ruleSubSum, ruleSubMax:
		return combineSubs(r, vs)
	}
	return vs[0]
}

// number parses an INFO number: an integer or a decimal, perhaps with a
// '%' after it. It returns the value, its decimals and whether it is one.
func number(s string) (float64, int, bool) {
	s = strings.TrimSuffix(s, "%")
	if s == "" || len(s) > 32 {
		return 0, 0, false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && c != '.' && c != '-' {
			return 0, 0, false // no exponents, inf or nan: Redis writes none
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, 0, false
	}
	dec := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		dec = len(s) - i - 1
	}
	return f, dec, true
}

// sumValues sums numbers: integers exactly, decimals with the most
// decimals any value has. False if any value is not a number.
func sumValues(vs []string) (string, bool) {
	var isum int64
	var fsum float64
	dec, exact := 0, true
	for _, v := range vs {
		f, d, ok := number(v)
		if !ok || strings.HasSuffix(v, "%") {
			return "", false
		}
		dec = max(dec, d)
		fsum += f
		if i, err := strconv.ParseInt(v, 10, 64); err == nil && exact {
			s := isum + i
			if (i > 0 && s < isum) || (i < 0 && s > isum) {
				exact = false // overflow: the float sum stands
			}
			isum = s
		} else {
			exact = false
		}
	}
	if exact {
		return strconv.FormatInt(isum, 10), true
	}
	return strconv.FormatFloat(fsum, 'f', dec, 64), true
}

// pickValue returns the value, as written, of the largest (or smallest)
// number. False if any value is not a number.
func pickValue(vs []string, largest bool) (string, bool) {
	best, bestF := "", 0.0
	for i, v := range vs {
		f, _, ok := number(v)
		if !ok {
			return "", false
		}
		if i == 0 || (largest && f > bestF) || (!largest && f < bestF) {
			best, bestF = v, f
		}
	}
	return best, true
}

// human writes the merged byte count of key without "_human" the way
// Redis's bytesToHuman does; the reference server's value when there is
// no such count.
func human(merged map[string]string, key string, vs []string) string {
	n, err := strconv.ParseInt(merged[strings.TrimSuffix(key, "_human")], 10, 64)
	if err != nil || n < 0 {
		return vs[0]
	}
	return bytesToHuman(n)
}

// bytesToHuman writes n as redis-server's INFO does: "200B", "943.34K",
// "11.54M", up to "P", two decimals.
func bytesToHuman(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	d := float64(n)
	for _, unit := range []string{"K", "M", "G", "T", "P"} {
		d /= 1024
		if d < 1024 || unit == "P" {
			return strconv.FormatFloat(d, 'f', 2, 64) + unit
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// subField is one "name=value" of a line such as "keys=2,expires=1".
type subField struct{ name, value string }

func parseSubs(v string) []subField {
	var out []subField
	for _, part := range strings.Split(v, ",") {
		name, value, _ := strings.Cut(part, "=")
		out = append(out, subField{name, value})
	}
	return out
}

// combineSubs merges lines of sub-fields: each sub-field by ruleSum (or
// ruleMax), except avg_ttl, averaged weighted by expires, and
// usec_per_call, recomputed as usec / calls.
func combineSubs(r rule, vs []string) string {
	var names []string
	values := map[string][]string{}
	for _, v := range vs {
		for _, sf := range parseSubs(v) {
			if _, ok := values[sf.name]; !ok {
				names = append(names, sf.name)
			}
			values[sf.name] = append(values[sf.name], sf.value)
		}
	}
	merged := make(map[string]string, len(names))
	for _, n := range names {
		sub := ruleSum
		if r == ruleSubMax {
			sub = ruleMax
		}
		merged[n] = combine(sub, n, values[n])
	}
	if r == ruleSubSum {
		if v, ok := weightedTTL(vs); ok {
			merged["avg_ttl"] = v
		}
		if v, ok := perCall(merged); ok {
			merged["usec_per_call"] = v
		}
	}
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteByte('=')
		b.WriteString(merged[n])
	}
	return b.String()
}

// weightedTTL is the average of avg_ttl over keyspace lines, weighted by
// their expires: the average TTL of all keys with one.
func weightedTTL(vs []string) (string, bool) {
	var sum, weight float64
	found := false
	for _, v := range vs {
		var ttl, exp float64
		var okT, okE bool
		for _, sf := range parseSubs(v) {
			switch sf.name {
			case "avg_ttl":
				ttl, _, okT = number(sf.value)
			case "expires":
				exp, _, okE = number(sf.value)
			}
		}
		if !okT || !okE {
			continue
		}
		found = true
		sum += ttl * exp
		weight += exp
	}
	if !found {
		return "", false
	}
	if weight == 0 {
		return "0", true
	}
	return strconv.FormatInt(int64(math.Round(sum/weight)), 10), true
}

// perCall recomputes a command's usec_per_call from its summed usec and
// calls, with the two decimals Redis writes.
func perCall(merged map[string]string) (string, bool) {
	if _, ok := merged["usec_per_call"]; !ok {
		return "", false
	}
	usec, _, ok1 := number(merged["usec"])
	calls, _, ok2 := number(merged["calls"])
	if !ok1 || !ok2 {
		return "", false
	}
	if calls == 0 {
		return "0.00", true
	}
	return strconv.FormatFloat(usec/calls, 'f', 2, 64), true
}
