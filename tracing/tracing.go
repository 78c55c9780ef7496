// Package tracing exports a sample of the proxy's requests as
// OpenTelemetry spans over OTLP/HTTP: for each request traced, a span of
// the client's request (from its read to its reply's write) and a child
// span of its (slowest) backend call, with the pool, the command, the
// server and the sizes as attributes. Which requests: a share chosen at
// random as each is answered (head sampling; the proxy decides, so the
// SDK samples every span it is given), and every request its pool's
// slowlog keeps, when Slow.
//
// A Tracer is built from the request records the proxy already makes
// for its views (observe.Record, with the times of the request's way
// through the proxy), after the request is answered: spans are built with
// those times, so tracing adds nothing to a request's latency, and
// nothing at all to a request not traced beyond one random draw. The
// spans leave in batches from the SDK's batch processor, whose queue is
// bounded: spans that do not fit are dropped, not waited for.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"shardproxy/observe"
)

// Config says where spans go and which requests are traced.
type Config struct {
	// Endpoint is the OTLP/HTTP receiver: a URL ("http://collector:4318",
	// "https://..."; /v1/traces is added when the URL has no path) or
	// host:port (plain HTTP).
	Endpoint string
	// Sample is the share of requests traced, 0 to 1.
	Sample float64
	// Slow traces every request its pool's slowlog keeps as well.
	Slow bool
	// Service is the resource's service.name; "" is "shardproxy".
	Service string
	// Version is the resource's service.version.
	Version string
	// Logger hears of export failures (the SDK's own error handler is
	// the process's).
	Logger *slog.Logger
}

// Tracer makes spans of request records and exports them. Its methods are
// safe for concurrent use; a nil Tracer traces nothing.
type Tracer struct {
	cfg    Config
	cut    uint64 // a request is traced when a random uint64 is below it
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// New starts a Tracer for cfg. Nothing is sent until a span is exported.
func New(cfg Config) (*Tracer, error) {
	if cfg.Sample < 0 || cfg.Sample > 1 || math.IsNaN(cfg.Sample) {
		return nil, fmt.Errorf("tracing: sample %v is not between 0 and 1", cfg.Sample)
	}
	opts, err := endpointOptions(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if cfg.Service == "" {
		cfg.Service = "shardproxy"
	}
	res := resource.NewSchemaless(semconv.ServiceName(cfg.Service), semconv.ServiceVersion(cfg.Version))
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
	)
	t := &Tracer{cfg: cfg, tp: tp, tracer: tp.Tracer("shardproxy")}
	switch {
	case cfg.Sample >= 1:
		t.cut = math.MaxUint64
	case cfg.Sample > 0:
		t.cut = uint64(cfg.Sample * math.MaxUint64)
	}
	return t, nil
}

// endpointOptions reads Endpoint into the exporter's options.
func endpointOptions(endpoint string) ([]otlptracehttp.Option, error) {
	if endpoint == "" {
		return nil, errors.New("tracing: no endpoint")
	}
	if !strings.Contains(endpoint, "://") {
		return []otlptracehttp.Option{otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure()}, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("tracing: endpoint %q is no http(s) URL or host:port", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.String())}, nil
}

// Wants reports whether a request is traced: slow says whether its
// pool's slowlog keeps it.
func (t *Tracer) Wants(slow bool) bool {
	if t == nil {
		return false
	}
	return slow && t.cfg.Slow || t.cut != 0 && rand.Uint64() < t.cut
}

// Export makes r's spans: the request's, and its backend call's when it
// made one. r is not kept.
func (t *Tracer) Export(r *observe.Record) {
	if t == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system", dbSystem(r.Protocol)),
		attribute.String("db.operation.name", r.Command),
		attribute.String("shardproxy.pool", r.Pool),
		attribute.String("client.address", r.Client),
		attribute.Int("shardproxy.keys", r.Keys),
		attribute.Int("shardproxy.calls", r.Calls),
		attribute.Int64("shardproxy.reply_bytes", r.ReplyBytes),
		attribute.String("shardproxy.result", r.Result.String()),
	}
	ctx, span := t.tracer.Start(context.Background(), r.Command,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(r.Read), trace.WithAttributes(attrs...))
	if r.Result == observe.ResultError {
		span.SetStatus(codes.Error, "")
	}
	if r.Calls > 0 && !r.Queued.IsZero() {
		t.backendSpan(ctx, r)
	}
	span.End(trace.WithTimestamp(r.Written))
}

// backendSpan makes the span of r's (slowest) backend call: from its
// queueing to its reply (or the request's end, when none came), with an
// event when it reached the server's socket.
func (t *Tracer) backendSpan(ctx context.Context, r *observe.Record) {
	_, span := t.tracer.Start(ctx, r.Command+" "+r.Backend,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(r.Queued),
		trace.WithAttributes(
			attribute.String("db.system", dbSystem(r.Protocol)),
			attribute.String("db.operation.name", r.Command),
			attribute.String("server.address", r.Backend),
			attribute.String("shardproxy.pool", r.Pool)))
	if !r.Sent.IsZero() {
		span.AddEvent("sent", trace.WithTimestamp(r.Sent))
	}
	end := r.Replied
	if end.IsZero() {
		end = r.Written
		span.SetStatus(codes.Error, "no reply")
	}
	span.End(trace.WithTimestamp(end))
}

// dbSystem is OpenTelemetry's db.system for a dialect's name.
func dbSystem(protocol string) string {
	if protocol == "memcache" {
		return "memcached"
	}
	return protocol
}

// Shutdown exports the spans still queued, within ctx, and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
