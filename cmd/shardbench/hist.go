package main

import (
	"runtime"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in nanoseconds, from 1 ns to maxLatency, to three
// significant digits.
const (
	maxLatency = int64(100e9)
	sigFigs    = 3
)

// recorder collects latencies into a few mutex-guarded HDR histograms;
// connection i records into shard i mod len(shards), one lock per batch. A
// histogram per connection would cost hundreds of KiB each at 2,000
// connections.
type recorder struct {
	shards []recShard
}

type recShard struct {
	mu sync.Mutex
	h  *hdrhistogram.Histogram
	_  [40]byte // keep neighbouring shards' locks off one cache line
}

func newRecorder() *recorder {
	r := &recorder{shards: make([]recShard, 4*runtime.GOMAXPROCS(0))}
	for i := range r.shards {
		r.shards[i].h = hdrhistogram.New(1, maxLatency, sigFigs)
	}
	return r
}

// record adds the latencies (ns) of connection id's batch.
func (r *recorder) record(id int, lat []int64) {
	s := &r.shards[id%len(r.shards)]
	s.mu.Lock()
	for _, v := range lat {
		_ = s.h.RecordValue(min(max(v, 1), maxLatency))
	}
	s.mu.Unlock()
}

// merged returns one histogram of everything recorded.
func (r *recorder) merged() *hdrhistogram.Histogram {
	h := hdrhistogram.New(1, maxLatency, sigFigs)
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		h.Merge(s.h)
		s.mu.Unlock()
	}
	return h
}

// errorLog keeps the first few wrong replies, for the report.
type errorLog struct {
	mu      sync.Mutex
	samples []string
}

// maxErrorSamples is how many wrong replies a run describes.
const maxErrorSamples = 10

func (l *errorLog) add(conn int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.samples) < maxErrorSamples {
		l.samples = append(l.samples, "conn "+itoa(conn)+": "+err.Error())
	}
}

func (l *errorLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.samples...)
}
