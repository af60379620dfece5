package server

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools/diag"
)

// BenchmarkTokenVersusKey: what a verified JWT access token costs a call
// beside an API key. Each iteration makes, side by side through the whole
// HTTP handler (authentication, pipeline, envelope), one echo call with a
// key and one with a token of a real provider (verified on first use, then
// from the cache until it expires), and times each; it reports the p50 of
// both and the p50 of the difference (the target is under 10 µs).
//
//	go test -run '^$' -bench BenchmarkTokenVersusKey -benchtime 20000x ./internal/server/
func BenchmarkTokenVersusKey(b *testing.B) {
	const resource = "http://toold.test/mcp"
	agent := oidctest.Client{ID: "agent", Secret: "agent-secret", RedirectURIs: []string{"http://127.0.0.1:*/cb"}, Audience: []string{resource}}
	idp := oidctest.Start(b, oidctest.Config{Clients: []oidctest.Client{agent}})
	token := idp.ClientCredentials(agent, "toold:call").AccessToken
	const key = "toold_bench_key_0123456789abcdef0123456789"
	h := benchHandler(b, oauth.Config{Issuer: idp.Issuer, Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true},
		auth.Key{Name: "bench", SHA256: auth.Hash(key), Tools: []string{"*"}})
	call := func(cred string) time.Duration {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/tools/echo/execute", strings.NewReader(`{"message":"hi"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+cred)
		rec := httptest.NewRecorder()
		start := time.Now()
		h.ServeHTTP(rec, req)
		d := time.Since(start)
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		return d
	}
	call(token) // verified once; every later call finds it in the cache
	var withKey, withToken, added []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		k, t := call(key), call(token)
		withKey, withToken, added = append(withKey, k), append(withToken, t), append(added, t-k)
	}
	p50 := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Nanoseconds()) / 1000
	}
	b.ReportMetric(p50(withKey), "key-p50-µs")
	b.ReportMetric(p50(withToken), "token-p50-µs")
	b.ReportMetric(p50(added), "added-p50-µs")
}

// benchHandler is a toold stack with echo, a key and a trusted issuer.
func benchHandler(b *testing.B, issuer oauth.Config, key auth.Key) http.Handler {
	b.Helper()
	reg, err := registry.New(registry.Options{}, diag.Echo())
	if err != nil {
		b.Fatal(err)
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	lim := limits.New(limits.Options{})
	lim.Register(reg.Entries()...)
	disp, err := dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Limiter: lim, Sanitizer: san})
	if err != nil {
		b.Fatal(err)
	}
	kr, err := auth.NewKeyring([]auth.Key{key})
	if err != nil {
		b.Fatal(err)
	}
	v, err := oauth.New(oauth.Options{Issuers: oauth.Issuers{issuer}})
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Options{Dispatcher: disp, Keyring: kr, OAuth: v})
	if err != nil {
		b.Fatal(err)
	}
	return s.Handler()
}
