package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// upstream is a real HTTP API on loopback whose answers a test scripts.
// It records every request it received.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	received []*seen
	hits     atomic.Int64
	handle   atomic.Pointer[http.HandlerFunc]
}

// seen is a request as the API got it.
type seen struct {
	Method  string
	Path    string // escaped, as sent
	Query   string
	Header  http.Header
	Body    string
	Address string
}

func newUpstream(t testing.TB, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{}
	u.set(h)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.hits.Add(1)
		u.mu.Lock()
		u.received = append(u.received, &seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: string(body), Address: r.Host})
		u.mu.Unlock()
		(*u.handle.Load())(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) set(h http.HandlerFunc) { u.handle.Store(&h) }

func (u *upstream) last(t testing.TB) *seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.received) == 0 {
		t.Fatal("the API received nothing")
	}
	return u.received[len(u.received)-1]
}

// sequence answers with each handler in turn, the last one repeating.
func sequence(hs ...http.HandlerFunc) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		i := min(int(n.Add(1))-1, len(hs)-1)
		hs[i](w, r)
	}
}

func status(code int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if w.Header().Get("Content-Type") == "" && strings.HasPrefix(body, "{") {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func ok(body string) http.HandlerFunc { return status(http.StatusOK, body) }

// clock stands in for time in retries and rates: waits are recorded and
// move the clock on at once, not slept.
type clock struct {
	mu      sync.Mutex
	waits   []time.Duration
	elapsed time.Duration
}

func (c *clock) sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.elapsed += d
	c.mu.Unlock()
	return ctx.Err()
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.elapsed)
}

func (c *clock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// build makes a Set from YAML (the http: section), with the loopback API's
// URL for $API, recorded waits, and a jitter of one half.
func build(t testing.TB, u *upstream, src string) (*Set, *clock, *prometheus.Registry) {
	t.Helper()
	s, err := tryBuild(u, src)
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	s.now, s.sleep, s.jitter = c.now, c.sleep, func() float64 { return 0.5 }
	reg := prometheus.NewRegistry()
	s.metrics = newMetrics(reg, s)
	return s, c, reg
}

func tryBuild(u *upstream, src string) (*Set, error) {
	if u != nil {
		src = strings.ReplaceAll(src, "$API", u.URL)
	}
	cfg, err := decodeConfig(src)
	if err != nil {
		return nil, err
	}
	return New(cfg, Options{})
}

func decodeConfig(src string) (Config, error) {
	var cfg Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	return cfg, dec.Decode(&cfg)
}

// call runs a tool's Execute directly, as the pipeline would after
// validation, under timeout.
func call(t testing.TB, s *Set, name, args string, timeout time.Duration) (any, error, *tools.Call) {
	t.Helper()
	for _, tl := range s.Tools() {
		if tl.Spec().Name != name {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		tree, err := strictjson.Decode([]byte(args), 0) // as the pipeline hands it over
		if err != nil {
			t.Fatal(err)
		}
		c := tools.NewCall(json.RawMessage(args), "test", "tester", nil).WithTree(tree)
		v, err := tl.Execute(ctx, c)
		return v, err, c
	}
	t.Fatalf("no tool %s", name)
	return nil, nil, nil
}

// pipeline serves the Set's tools through dispatch, as toold does:
// validation, sanitizers, bulkheads, deadlines, fallbacks. configure, when
// given, adjusts the dispatcher's options (a logger to observe, say)
// before it is built.
func pipeline(t testing.TB, s *Set, configure ...func(*dispatch.Options)) *dispatch.Dispatcher {
	t.Helper()
	reg, err := registry.New(registry.Options{}, s.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: limits.New(limits.Options{})}
	for _, c := range configure {
		c(&opts)
	}
	d, err := dispatch.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func execute(d *dispatch.Dispatcher, name, args string) *dispatch.Envelope {
	return d.Execute(context.Background(), &dispatch.Request{Tool: name, Body: []byte(args), RequestID: "test"})
}

func errorOf(t testing.TB, err error) *tools.Error {
	t.Helper()
	te, ok := tools.AsError(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a tools.Error", err, err)
	}
	return te
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// scrape renders the registry as /metrics would.
func scrape(t testing.TB, reg *prometheus.Registry) string {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
