package tracing_test

import (
	"context"
	"testing"
	"time"

	"shardproxy/internal/testserver"
	"shardproxy/observe"
	"shardproxy/tracing"
)

// TestExport exports two records to a real OTLP/HTTP receiver: a request
// with a backend call becomes a server span with a client child span at
// the record's times, with the pool, command, server and result as
// attributes; a request answered by the proxy alone is one span.
func TestExport(t *testing.T) {
	rx := testserver.StartOTLP(t)
	tr, err := tracing.New(tracing.Config{Endpoint: rx.Endpoint, Sample: 1, Service: "edge", Version: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1_800_000_000, 0)
	ms := func(n int) time.Time { return at.Add(time.Duration(n) * time.Millisecond) }
	tr.Export(&observe.Record{Pool: "cache", Protocol: "memcache", Command: "get", Keys: 1, Client: "10.0.0.9:5000",
		Backend: "mc1", Calls: 1, Read: ms(0), Queued: ms(1), Sent: ms(2), Replied: ms(52), Written: ms(53),
		Result: observe.ResultHit, ReplyBytes: 120})
	tr.Export(&observe.Record{Pool: "cache", Protocol: "redis", Command: "ping", Read: ms(100), Written: ms(101)})
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	spans := map[string]testserver.Span{}
	for _, s := range rx.Spans() {
		spans[s.Name] = s
	}
	get, call, ping := spans["get"], spans["get mc1"], spans["ping"]
	if len(spans) != 3 || get.SpanID == "" || call.SpanID == "" || ping.SpanID == "" {
		t.Fatalf("spans: %+v", spans)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"request kind", get.Kind, "SPAN_KIND_SERVER"},
		{"request root", get.ParentID, ""},
		{"request times", [2]time.Time{get.Start, get.End}, [2]time.Time{ms(0), ms(53)}},
		{"call kind", call.Kind, "SPAN_KIND_CLIENT"},
		{"call parent", [2]string{call.TraceID, call.ParentID}, [2]string{get.TraceID, get.SpanID}},
		{"call times", [2]time.Time{call.Start, call.End}, [2]time.Time{ms(1), ms(52)}},
		{"call events", len(call.Events), 1},
		{"service", get.Service, "edge"},
		{"db.system", get.Attrs["db.system"], "memcached"},
		{"pool", get.Attrs["shardproxy.pool"], "cache"},
		{"command", get.Attrs["db.operation.name"], "get"},
		{"result", get.Attrs["shardproxy.result"], "hit"},
		{"reply bytes", get.Attrs["shardproxy.reply_bytes"], "120"},
		{"client", get.Attrs["client.address"], "10.0.0.9:5000"},
		{"server", call.Attrs["server.address"], "mc1"},
		{"ping system", ping.Attrs["db.system"], "redis"},
		{"ping root", ping.ParentID, ""},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.what, c.got, c.want)
		}
	}
}

// TestWants checks the sampling: a share of 0 traces only slow requests
// (when Slow), 1 traces all, 0.25 about a quarter.
func TestWants(t *testing.T) {
	rx := testserver.StartOTLP(t)
	count := func(sample float64, slow, isSlow bool) int {
		tr, err := tracing.New(tracing.Config{Endpoint: rx.Endpoint, Sample: sample, Slow: slow})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Shutdown(context.Background())
		n := 0
		for range 10000 {
			if tr.Wants(isSlow) {
				n++
			}
		}
		return n
	}
	if n := count(0, true, false); n != 0 {
		t.Errorf("sample 0, fast: %d traced", n)
	}
	if n := count(0, true, true); n != 10000 {
		t.Errorf("sample 0, slow, Slow: %d traced, want all", n)
	}
	if n := count(0, false, true); n != 0 {
		t.Errorf("sample 0, slow, not Slow: %d traced", n)
	}
	if n := count(1, false, false); n != 10000 {
		t.Errorf("sample 1: %d traced", n)
	}
	if n := count(0.25, false, false); n < 2200 || n > 2800 {
		t.Errorf("sample 0.25: %d of 10000 traced", n)
	}
	var none *tracing.Tracer
	if none.Wants(true) {
		t.Errorf("a nil Tracer wants a request")
	}
	for _, bad := range []tracing.Config{{Endpoint: rx.Endpoint, Sample: 2}, {Endpoint: "ftp://x"}, {}} {
		if _, err := tracing.New(bad); err == nil {
			t.Errorf("New(%+v) accepted", bad)
		}
	}
}
