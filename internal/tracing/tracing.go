// Package tracing is toold's OpenTelemetry tracing: the tracer provider
// built from the standard OTEL_* environment and its mirror in the
// configuration, W3C trace context in and out (HTTP headers, MCP _meta,
// a CLI's environment, records in the state store), and the trace fields of
// log lines.
//
// Off by default, and then free: Setup returns a nil *Tracing, whose Tracer
// is nil, and every instrumented place checks for nil before it does any
// work (no span, no context value, no allocation). The package is a leaf:
// it imports OpenTelemetry and zap, nothing of toold's, so the transports,
// the pipeline and the tools that reach the outside may all use it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of toold's spans.
const Scope = "github.com/toold/toold"

// Config mirrors the OTEL_* variables in toold's configuration file
// (tracing:). A variable that is set wins over its key: the variables are
// how platforms (the OpenTelemetry Operator, a collector's sidecar) inject
// tracing, and an operator who sets one means it for this process.
type Config struct {
	// Enabled turns tracing on. OTEL_EXPORTER_OTLP_ENDPOINT (or
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) turns it on too, unless
	// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP/HTTP base URL (http://collector:4318); spans go
	// to its /v1/traces. OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string `yaml:"endpoint"`
	// Headers are sent with every export (an ingest key).
	// OTEL_EXPORTER_OTLP_HEADERS, as key=value,key=value.
	Headers map[string]string `yaml:"headers"`
	// Sampler is one of always_on, always_off, traceidratio,
	// parentbased_always_on (the default), parentbased_always_off,
	// parentbased_traceidratio. OTEL_TRACES_SAMPLER.
	Sampler string `yaml:"sampler" validate:"omitempty,oneof=always_on always_off traceidratio parentbased_always_on parentbased_always_off parentbased_traceidratio"`
	// SamplerArg is the ratio of the traceidratio samplers, 0 to 1
	// (default 1). OTEL_TRACES_SAMPLER_ARG.
	SamplerArg *float64 `yaml:"sampler_arg" validate:"omitempty,gte=0,lte=1"`
	// ServiceName names toold in traces (default toold).
	// OTEL_SERVICE_NAME.
	ServiceName string `yaml:"service_name"`
	// Timeout bounds one export (default 10s). OTEL_EXPORTER_OTLP_TIMEOUT,
	// in milliseconds.
	Timeout time.Duration `yaml:"timeout" validate:"gte=0"`
}

// Tracing is a running tracer provider. A nil *Tracing is tracing off.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	desc     string
}

// Options are what a test or a benchmark replaces.
type Options struct {
	// Exporter replaces the OTLP exporter (tests: the SDK's in-memory
	// exporter). With it, tracing is on whatever the configuration says.
	Exporter sdktrace.SpanExporter
	// Sync exports each span as it ends instead of in batches, so a test
	// sees it at once.
	Sync bool
	// Version is toold's version, for the resource.
	Version string
}

// Setup builds the tracer provider, or returns nil when tracing is off.
// env looks up a variable (os.LookupEnv in toold).
func Setup(ctx context.Context, cfg Config, env func(string) (string, bool), o Options) (*Tracing, error) {
	r, err := resolve(cfg, env)
	if err != nil {
		return nil, err
	}
	if !r.enabled && o.Exporter == nil {
		return nil, nil
	}
	exp := o.Exporter
	if exp == nil {
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(r.endpoint), otlptracehttp.WithTimeout(r.timeout)}
		if len(r.headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(r.headers))
		}
		if exp, err = otlptracehttp.New(ctx, opts...); err != nil {
			return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
		}
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(r.service), semconv.ServiceVersion(o.Version)))
	if err != nil {
		res = resource.Default()
	}
	var proc sdktrace.SpanProcessor
	if o.Sync {
		proc = sdktrace.NewSimpleSpanProcessor(exp)
	} else {
		proc = sdktrace.NewBatchSpanProcessor(exp)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(r.sampler), sdktrace.WithResource(res), sdktrace.WithSpanProcessor(proc))
	desc := fmt.Sprintf("OTLP/HTTP to %s, sampler %s", r.endpoint, r.samplerName)
	if o.Exporter != nil {
		desc = "a test exporter, sampler " + r.samplerName
	}
	return &Tracing{provider: tp, tracer: tp.Tracer(Scope, trace.WithInstrumentationVersion(o.Version)), desc: desc}, nil
}

// Tracer is toold's tracer, or nil when tracing is off.
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil {
		return nil
	}
	return t.tracer
}

// String says where spans go, for the start-up log.
func (t *Tracing) String() string {
	if t == nil {
		return "off"
	}
	return t.desc
}

// Shutdown exports what is buffered, within ctx.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// resolved is the configuration with the environment applied.
type resolved struct {
	enabled     bool
	endpoint    string
	headers     map[string]string
	sampler     sdktrace.Sampler
	samplerName string
	service     string
	timeout     time.Duration
}

func resolve(cfg Config, env func(string) (string, bool)) (*resolved, error) {
	get := func(name string) string {
		v, _ := env(name)
		return strings.TrimSpace(v)
	}
	r := &resolved{enabled: cfg.Enabled, endpoint: cfg.Endpoint, headers: cfg.Headers, service: cfg.ServiceName, timeout: cfg.Timeout}
	if v := first(get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), get("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		r.endpoint, r.enabled = v, true
		if get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			r.endpoint = strings.TrimRight(v, "/") + "/v1/traces" // the generic endpoint is a base
		}
	} else if r.endpoint != "" {
		r.endpoint = strings.TrimRight(r.endpoint, "/") + "/v1/traces"
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(get("OTEL_TRACES_EXPORTER"), "none") {
		r.enabled = false
	}
	if v := get("OTEL_TRACES_EXPORTER"); v != "" && !strings.EqualFold(v, "otlp") && !strings.EqualFold(v, "none") {
		return nil, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: toold exports traces over OTLP only (otlp or none)", v)
	}
	if p := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" || get("OTEL_EXPORTER_OTLP_PROTOCOL") != "" {
		p = first(p, get("OTEL_EXPORTER_OTLP_PROTOCOL"))
		if p != "http/protobuf" {
			return nil, fmt.Errorf("tracing: OTLP protocol %q: toold speaks http/protobuf (port 4318 on a collector); grpc is not built in", p)
		}
	}
	if v := first(get("OTEL_EXPORTER_OTLP_TRACES_HEADERS"), get("OTEL_EXPORTER_OTLP_HEADERS")); v != "" {
		h, err := parseHeaders(v)
		if err != nil {
			return nil, err
		}
		r.headers = h
	}
	if v := first(get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"), get("OTEL_EXPORTER_OTLP_TIMEOUT")); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_TIMEOUT=%q is not a positive number of milliseconds", v)
		}
		r.timeout = time.Duration(ms) * time.Millisecond
	}
	if r.timeout <= 0 {
		r.timeout = 10 * time.Second
	}
	r.service = first(get("OTEL_SERVICE_NAME"), r.service, "toold")
	if r.enabled {
		if r.endpoint == "" {
			r.endpoint = "http://localhost:4318/v1/traces" // the specification's default
		}
		if u, err := url.Parse(r.endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("tracing: endpoint %q is not an http(s) URL such as http://collector:4318", r.endpoint)
		}
	}
	name, arg := first(get("OTEL_TRACES_SAMPLER"), cfg.Sampler, "parentbased_always_on"), 1.0
	if cfg.SamplerArg != nil {
		arg = *cfg.SamplerArg
	}
	if v := get("OTEL_TRACES_SAMPLER_ARG"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("tracing: OTEL_TRACES_SAMPLER_ARG=%q is not a ratio from 0 to 1", v)
		}
		arg = f
	}
	s, err := sampler(name, arg)
	if err != nil {
		return nil, err
	}
	r.sampler, r.samplerName = s, name
	if strings.HasSuffix(name, "traceidratio") {
		r.samplerName += " " + strconv.FormatFloat(arg, 'g', -1, 64)
	}
	return r, nil
}

func sampler(name string, arg float64) (sdktrace.Sampler, error) {
	switch strings.ToLower(name) {
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(arg), nil
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(arg)), nil
	}
	return nil, fmt.Errorf("tracing: sampler %q: use always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// parseHeaders reads the OTLP headers list: key=value pairs separated by
// commas, values URL-encoded (the specification's format).
func parseHeaders(s string) (map[string]string, error) {
	h := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("tracing: OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs separated by commas")
		}
		if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		h[k] = v
	}
	return h, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// propagator is W3C trace context, traceparent only (see parentOnly).
// toold carries no baggage either: it would pass whatever a caller put
// there on to every API and CLI a tool reaches.
var propagator propagation.TextMapPropagator = parentOnly{}
