package testserver

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// OTLP is an OpenTelemetry receiver of traces over OTLP/HTTP (protobuf, as
// the official definitions give it) on a free loopback port: it keeps
// every span it is sent, for a test to read.
type OTLP struct {
	// Endpoint is its URL, for an exporter ("http://127.0.0.1:PORT").
	Endpoint string

	mu    sync.Mutex
	spans []Span
}

// Span is one span an OTLP receiver got, its ids in hex and its
// attributes as strings.
type Span struct {
	Service         string // the resource's service.name
	Name            string
	TraceID, SpanID string
	ParentID        string // "" for a root
	Kind            string // SPAN_KIND_SERVER, ...
	Start, End      time.Time
	Attrs           map[string]string
	Events          []string
	StatusError     bool
	StatusMessage   string
}

// StartOTLP starts a receiver that runs until the test ends.
func StartOTLP(t testing.TB) *OTLP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &OTLP{Endpoint: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", o.export)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return o
}

// export takes one ExportTraceServiceRequest.
func (o *OTLP) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req collector.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Service: service, Name: s.Name, TraceID: hex.EncodeToString(s.TraceId),
					SpanID: hex.EncodeToString(s.SpanId), ParentID: hex.EncodeToString(s.ParentSpanId),
					Kind: s.Kind.String(), Start: time.Unix(0, int64(s.StartTimeUnixNano)),
					End: time.Unix(0, int64(s.EndTimeUnixNano)), Attrs: attrs(s.Attributes),
					StatusError: s.GetStatus().GetCode() == 2, StatusMessage: s.GetStatus().GetMessage()}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
				}
				o.spans = append(o.spans, sp)
			}
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// attrs renders attributes as strings.
func attrs(kvs []*common.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *common.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *common.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(x.IntValue)
		case *common.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(x.BoolValue)
		case *common.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(x.DoubleValue)
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

// Spans returns the spans received so far.
func (o *OTLP) Spans() []Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Span(nil), o.spans...)
}
