package main

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/config"
	"github.com/toold/toold/internal/tracing"
)

// startTracing builds the tracer provider from the configuration and the
// OTEL_* variables. Nothing is sent before a span ends, so -check-config
// builds it too, and sends nothing.
func (a *app) startTracing(env func(string) (string, bool)) error {
	t, err := tracing.Setup(context.Background(), a.cfg.Tracing, env, tracing.Options{Version: versionString()})
	if err != nil {
		return &config.Error{Problems: []config.Problem{{Path: "tracing", Message: err.Error()}}}
	}
	a.tracing = t
	if t == nil {
		return nil
	}
	a.log.Info("tracing on", zap.String("export", t.String()))
	a.closers = append(a.closers, func() error {
		// What is buffered goes out before exit, within a bound: a
		// collector that is down must not hold the shutdown.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return t.Shutdown(ctx)
	})
	return nil
}

// tracePayloads is the tools whose spans carry their (sanitized)
// arguments and results: those with tools.<name>.trace_payloads.
func tracePayloads(cfg *config.Config) func(string) bool {
	on := map[string]bool{}
	for name, t := range cfg.Tools {
		if t.TracePayloads {
			on[name] = true
		}
	}
	if len(on) == 0 {
		return nil
	}
	return func(tool string) bool { return on[tool] }
}
