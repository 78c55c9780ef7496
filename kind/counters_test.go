package kind

import (
	"fmt"
	"testing"

	"shardproxy/route"
)

// fakeSource counts what the test says.
type fakeSource struct{ stats []route.Stat }

func (f *fakeSource) Counters() []route.Stat { return f.stats }

func counter(name string, v int64) route.Stat {
	return route.Stat{Name: name, Kind: route.Counter, Value: v}
}

// TestRouterCounters: a counter is the retired sources' final counts plus
// the live ones', so replacing a source never lowers it; gauges stay as
// the router gives them; past maxCarriedNames, names no live source
// counts are dropped.
func TestRouterCounters(t *testing.T) {
	var rc Counters
	old := &fakeSource{[]route.Stat{counter("hits", 10)}}
	rc.Add(old)
	router := []route.Stat{counter("hits", 0), {Name: "items", Kind: route.Gauge, Value: 7}}
	value := func() (hits, items int64) {
		st := rc.Apply(router)
		return st[0].Value, st[1].Value
	}
	if h, i := value(); h != 10 || i != 7 {
		t.Fatalf("one source: hits %d, items %d; want 10 and 7", h, i)
	}
	cur := &fakeSource{[]route.Stat{counter("hits", 3)}} // a reload's new source, the old still draining
	rc.Add(cur)
	if h, _ := value(); h != 13 {
		t.Errorf("two live sources: hits %d; want 13", h)
	}
	old.stats[0].Value = 12 // the old one answers its last requests
	rc.Retire(old)
	old.stats[0].Value = 99 // counts after it closed are not seen
	if h, _ := value(); h != 15 {
		t.Errorf("after the old source retired: hits %d; want 15", h)
	}
	rc.Retire(old) // twice is once
	if h, _ := value(); h != 15 {
		t.Errorf("after a second retire: hits %d; want 15", h)
	}

	for i := range maxCarriedNames + 10 {
		s := &fakeSource{[]route.Stat{counter(fmt.Sprintf("user_%d", i), 1)}}
		rc.Add(s)
		rc.Retire(s)
	}
	rc.Retire(cur)
	if n := len(rc.base); n > maxCarriedNames {
		t.Errorf("%d names kept; want at most %d", n, maxCarriedNames)
	}
}
