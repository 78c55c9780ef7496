package main

import (
	"context"
	"time"

	"shardproxy/config"
	"shardproxy/proxy"
	"shardproxy/tracing"
)

// trace makes the proxy trace as t says (the shardproxy: section's
// trace_* keys): a new tracer when t changed, none when its endpoint is
// "". The tracer it replaces sends what it has queued first. Called at
// start and after each reload, with op.mu held or before any reload.
func (op *operator) trace(t config.Traces) error {
	if t == op.traces {
		return nil
	}
	var next *tracing.Tracer
	if t.Endpoint != "" {
		var err error
		next, err = tracing.New(tracing.Config{Endpoint: t.Endpoint, Sample: t.Sample, Slow: !t.SlowOff,
			Service: t.Service, Version: proxy.Version, Logger: op.log})
		if err != nil {
			return err
		}
		op.srv.SetTracer(next)
	} else {
		op.srv.SetTracer(nil)
	}
	op.stopTracer()
	op.traces, op.tracer = t, next
	if next != nil {
		op.log.Info("tracing", "endpoint", t.Endpoint, "sample", t.Sample, "slow", !t.SlowOff)
	} else {
		op.log.Info("tracing off")
	}
	return nil
}

// stopTracer sends the spans the tracer has queued, within 2 s, and stops
// it.
func (op *operator) stopTracer() {
	if op.tracer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := op.tracer.Shutdown(ctx); err != nil {
		op.log.Warn("tracing: spans not sent", "err", err)
	}
	op.tracer = nil
}
