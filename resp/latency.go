package resp

import (
	"cmp"
	"slices"

	"github.com/tidwall/redcon"

	"shardproxy/codec"
)

// LATENCY through the proxy. Its events (command, fast-command,
// expire-cycle, fork, ...) and its per-command histograms are each
// server's own: what took a server long, measured inside it. So LATENCY
// LATEST, HISTORY, HISTOGRAM, DOCTOR and GRAPH go to every server and
// their replies are merged (RESET too, under redis_config); the
// proxy's own view of latency, from its clients' side, is its slowlog and
// INFO proxy's.

// Cmd numbers of the LATENCY subcommands Merge singles out.
var (
	cmdLatencyLatest    = lookup("latency|latest")
	cmdLatencyHistory   = lookup("latency|history")
	cmdLatencyHistogram = lookup("latency|histogram")
	cmdLatencyDoctor    = lookup("latency|doctor")
	cmdLatencyGraph     = lookup("latency|graph")
	cmdLatencyReset     = lookup("latency|reset")
)

// latencyEvent is one event of LATENCY LATEST: when it last happened,
// how long that took, and the longest it took (ms).
type latencyEvent struct {
	name             []byte
	at, latest, most int64
}

// readInts reads the array reply at the start of raw whose elements are
// all integers.
func readInts(raw []byte) ([]int64, bool) {
	elems, ok := readElements(raw)
	if !ok {
		return nil, false
	}
	return readIntsOf(elems)
}

// mergeLatencyLatest answers LATENCY LATEST: each event any server
// reported once, in the order first seen, with its latest occurrence
// over the servers and the longest.
func mergeLatencyLatest(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var events []latencyEvent
	for _, r := range replies {
		elems, ok := readElements(r.Raw)
		if !ok {
			return dst, false
		}
		for _, e := range elems {
			parts, ok := readElements(e)
			if !ok || len(parts) != 4 {
				return dst, false
			}
			name, null, ok := readString(parts[0])
			if !ok || null {
				return dst, false
			}
			ns, ok := readIntsOf(parts[1:])
			if !ok {
				return dst, false
			}
			ev := latencyEvent{name: name, at: ns[0], latest: ns[1], most: ns[2]}
			i := slices.IndexFunc(events, func(x latencyEvent) bool { return string(x.name) == string(name) })
			switch {
			case i < 0:
				events = append(events, ev)
			case ev.at > events[i].at:
				events[i].at, events[i].latest = ev.at, ev.latest
			}
			if i >= 0 {
				events[i].most = max(events[i].most, ev.most)
			}
		}
	}
	dst = redcon.AppendArray(dst, len(events))
	for _, ev := range events {
		dst = redcon.AppendArray(dst, 4)
		dst = redcon.AppendBulk(dst, ev.name)
		dst = redcon.AppendInt(dst, ev.at)
		dst = redcon.AppendInt(dst, ev.latest)
		dst = redcon.AppendInt(dst, ev.most)
	}
	return dst, true
}

// readIntsOf reads integer replies, each whole.
func readIntsOf(vals [][]byte) ([]int64, bool) {
	ns := make([]int64, len(vals))
	for i, v := range vals {
		var ok bool
		if ns[i], ok = readInt(v); !ok {
			return nil, false
		}
	}
	return ns, true
}

// mergeLatencyHistory answers LATENCY HISTORY event: every server's
// samples of it, [time, ms] each, by time. Samples of one second are one,
// the longest, as a server keeps one sample a second: a DEBUG SLEEP sent
// to every server is one event of the pool, not one per server.
func mergeLatencyHistory(dst []byte, replies []codec.Reply) ([]byte, bool) {
	var samples [][]int64
	for _, r := range replies {
		elems, ok := readElements(r.Raw)
		if !ok {
			return dst, false
		}
		for _, e := range elems {
			s, ok := readInts(e)
			if !ok || len(s) != 2 {
				return dst, false
			}
			samples = append(samples, s)
		}
	}
	slices.SortStableFunc(samples, func(a, b []int64) int { return cmp.Compare(a[0], b[0]) })
	kept := samples[:0]
	for _, s := range samples {
		if n := len(kept); n > 0 && kept[n-1][0] == s[0] {
			kept[n-1][1] = max(kept[n-1][1], s[1])
			continue
		}
		kept = append(kept, s)
	}
	samples = kept
	dst = redcon.AppendArray(dst, len(samples))
	for _, s := range samples {
		dst = redcon.AppendArray(dst, 2)
		dst = redcon.AppendInt(dst, s[0])
		dst = redcon.AppendInt(dst, s[1])
	}
	return dst, true
}

// commandHistogram is one command's LATENCY HISTOGRAM: its calls, and
// the calls per bucket (the bucket's upper bound in µs), not cumulated.
type commandHistogram struct {
	name    []byte
	calls   int64
	buckets map[int64]int64
}

// mergeLatencyHistogram answers LATENCY HISTOGRAM [command ...]: per
// command any server reported, in the order first seen, the calls summed
// and the histogram of every server's calls. Redis reports a command's
// histogram as cumulative counts at power-of-two bounds, listing a bound
// only where the count grew; the bounds are the same on every server, so
// the counts per bucket add up.
func mergeLatencyHistogram(dst []byte, proto uint8, replies []codec.Reply) ([]byte, bool) {
	var cmds []*commandHistogram
	ok := eachField(replies, func(name, _, value []byte) bool {
		j := slices.IndexFunc(cmds, func(c *commandHistogram) bool { return string(c.name) == string(name) })
		if j < 0 {
			cmds = append(cmds, &commandHistogram{name: name, buckets: map[int64]int64{}})
			j = len(cmds) - 1
		}
		return cmds[j].add(value)
	})
	if !ok {
		return dst, false
	}
	dst = appendFieldsHeader(dst, len(cmds), proto)
	for _, c := range cmds {
		dst = redcon.AppendBulk(dst, c.name)
		dst = appendFieldsHeader(dst, 2, proto)
		dst = redcon.AppendBulkString(dst, "calls")
		dst = redcon.AppendInt(dst, c.calls)
		dst = redcon.AppendBulkString(dst, "histogram_usec")
		bounds := make([]int64, 0, len(c.buckets))
		for b := range c.buckets {
			bounds = append(bounds, b)
		}
		slices.Sort(bounds)
		dst = appendFieldsHeader(dst, len(bounds), proto)
		var sum int64
		for _, b := range bounds {
			sum += c.buckets[b]
			dst = redcon.AppendInt(dst, b)
			dst = redcon.AppendInt(dst, sum)
		}
	}
	return dst, true
}

// add adds one server's histogram of the command, the map of "calls"
// and "histogram_usec".
func (c *commandHistogram) add(raw []byte) bool {
	fields, ok := readFields(raw)
	if !ok {
		return false
	}
	for i := 0; i < len(fields); i += 2 {
		key, _, ok := readString(fields[i])
		if !ok {
			return false
		}
		switch string(key) {
		case "calls":
			n, ok := readInt(fields[i+1])
			if !ok {
				return false
			}
			c.calls += n
		case "histogram_usec":
			counts, ok := readFields(fields[i+1])
			if !ok {
				return false
			}
			ns, ok := readIntsOf(counts)
			if !ok {
				return false
			}
			var prev int64
			for k := 0; k < len(ns); k += 2 {
				c.buckets[ns[k]] += ns[k+1] - prev
				prev = ns[k+1]
			}
		}
	}
	return true
}

// mergeTexts answers LATENCY DOCTOR and GRAPH, a text of each server's:
// the texts one after the other, each under a line naming its server.
func mergeTexts(dst []byte, proto uint8, replies []codec.Reply) ([]byte, bool) {
	var text []byte
	for i, r := range replies {
		t, null, ok := readString(r.Raw)
		if !ok || null {
			return dst, false
		}
		if i > 0 {
			text = append(text, '\n')
		}
		text = append(text, "server "+serverName(r, i)+":\n"...)
		text = append(text, t...)
	}
	return appendText(dst, proto, text), true
}
