package proxy

import (
	"fmt"
	"testing"

	"shardproxy/route"
)

// fakeSource counts what the test says.
type fakeSource struct{ stats []route.Stat }

func (f *fakeSource) counters() []route.Stat { return f.stats }

func counter(name string, v int64) route.Stat {
	return route.Stat{Name: name, Kind: route.Counter, Value: v}
}

// TestRouterCounters: a counter is the retired sources' final counts plus
// the live ones', so replacing a source never lowers it; gauges stay as
// the router gives them; past maxCarriedNames, names no live source
// counts are dropped.
func TestRouterCounters(t *testing.T) {
	var rc routerCounters
	old := &fakeSource{[]route.Stat{counter("hits", 10)}}
	rc.add(old)
	router := []route.Stat{counter("hits", 0), {Name: "items", Kind: route.Gauge, Value: 7}}
	value := func() (hits, items int64) {
		st := rc.apply(router)
		return st[0].Value, st[1].Value
	}
	if h, i := value(); h != 10 || i != 7 {
		t.Fatalf("one source: hits %d, items %d; want 10 and 7", h, i)
	}
	cur := &fakeSource{[]route.Stat{counter("hits", 3)}} // a reload's new source, the old still draining
	rc.add(cur)
	if h, _ := value(); h != 13 {
		t.Errorf("two live sources: hits %d; want 13", h)
	}
	old.stats[0].Value = 12 // the old one answers its last requests
	rc.retire(old)
	old.stats[0].Value = 99 // counts after it closed are not seen
	if h, _ := value(); h != 15 {
		t.Errorf("after the old source retired: hits %d; want 15", h)
	}
	rc.retire(old) // twice is once
	if h, _ := value(); h != 15 {
		t.Errorf("after a second retire: hits %d; want 15", h)
	}

	for i := range maxCarriedNames + 10 {
		s := &fakeSource{[]route.Stat{counter(fmt.Sprintf("user_%d", i), 1)}}
		rc.add(s)
		rc.retire(s)
	}
	rc.retire(cur)
	if n := len(rc.base); n > maxCarriedNames {
		t.Errorf("%d names kept; want at most %d", n, maxCarriedNames)
	}
}
