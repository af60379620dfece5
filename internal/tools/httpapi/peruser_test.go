package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
)

var (
	alice = &auth.Identity{Kind: auth.KindKey, Name: "alice"}
	bob   = &auth.Identity{Kind: auth.KindKey, Name: "bob"}
	carol = &auth.Identity{Kind: auth.KindKey, Name: "carol"}
)

// testVault is a vault in a real embedded store, and its keys.
func testVault(t testing.TB) (*credentials.Vault, *credentials.Keyring) {
	t.Helper()
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	kr, err := credentials.NewKeyring(credentials.NewKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := credentials.New(context.Background(), credentials.Options{KV: st.Credentials, NotFound: state.ErrNotFound,
		Conflict: state.ErrConflict, Keys: kr, Local: true})
	if err != nil {
		t.Fatal(err)
	}
	return v, kr
}

func buildWith(t testing.TB, u *upstream, opts Options, src string) *Set {
	t.Helper()
	cfg, err := decodeConfig(strings.ReplaceAll(src, "$API", u.URL))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func callAs(d *dispatch.Dispatcher, who *auth.Identity, tool, args string) *dispatch.Envelope {
	return d.Execute(context.Background(), &dispatch.Request{Tool: tool, Body: []byte(args), RequestID: "test", Principal: who})
}

// TestCallerCredentials: a tool that names the caller's own credential
// (${user:name}, in each form auth takes) sends each principal's own
// value, resolved as the request is made; a caller without it gets
// credential_required naming it and the route to set it, and the API is
// not called; the value the API echoes is scrubbed from the result.
func TestCallerCredentials(t *testing.T) {
	v, _ := testVault(t)
	ctx := context.Background()
	for who, val := range map[*auth.Identity]string{alice: "alice-gh-token-0123456789", bob: "bob-gh-token-9876543210"} {
		if _, err := v.PutSecret(ctx, who, "github", []byte(val)); err != nil {
			t.Fatal(err)
		}
	}
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"echo":` + mustJSON(r.Header.Get("Authorization")+r.Header.Get("X-Key")+r.URL.RawQuery) + `}`))
	})
	for _, tt := range []struct {
		name, auth string
		sent       func(s *seen) string
		want       func(v string) string
	}{
		{"bearer", `{bearer: "${user:github}"}`, func(s *seen) string { return s.Header.Get("Authorization") }, func(v string) string { return "Bearer " + v }},
		{"header", `{header: {name: X-Key, value: "tok ${user:github}"}}`, func(s *seen) string { return s.Header.Get("X-Key") }, func(v string) string { return "tok " + v }},
		{"query", `{query: {name: key, value: "${user:github}"}}`, func(s *seen) string { return s.Query }, func(v string) string { return "key=" + v }},
		{"basic", `{basic: {username: me, password: "${user:github}"}}`, func(s *seen) string {
			r := &http.Request{Header: s.Header}
			user, pass, _ := r.BasicAuth()
			return user + ":" + pass
		}, func(v string) string { return "me:" + v }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := buildWith(t, u, Options{Vault: v}, `
tools:
  - name: gh
    description: Calls the API as the caller.
    request: {url: "$API/user"}
    auth: `+tt.auth+`
    allow: [127.0.0.1]
    allow_http: true
`)
			d := pipeline(t, s)
			for who, val := range map[*auth.Identity]string{alice: "alice-gh-token-0123456789", bob: "bob-gh-token-9876543210"} {
				env := callAs(d, who, "gh", `{}`)
				if !env.Success {
					t.Fatalf("%s: %+v", who.Name, env.Error)
				}
				if got := tt.sent(u.last(t)); got != tt.want(val) {
					t.Errorf("%s's call sent %q, want %q", who.Name, got, tt.want(val))
				}
				if strings.Contains(string(env.Data), val) {
					t.Errorf("%s's result holds the credential: %s", who.Name, env.Data)
				}
			}
			before := u.hits.Load()
			env := callAs(d, carol, "gh", `{}`)
			if env.Error == nil || env.Error.Code != "credential_required" || env.Error.Credential != "github" || env.Error.Upstream != "gh" ||
				!strings.Contains(env.Error.Suggestion, "PUT /credentials/github") {
				t.Errorf("carol without it: %+v", env.Error)
			}
			if u.hits.Load() != before {
				t.Error("the API was called without a credential")
			}
		})
	}
}

// TestCallerCredentialsNeedAVault: a tool naming ${user:...} without a
// vault is refused at start, saying what to set.
func TestCallerCredentialsNeedAVault(t *testing.T) {
	_, err := tryBuild(nil, `
tools:
  - name: gh
    description: d
    request: {url: "https://api.example.com/user"}
    auth: {bearer: "${user:github}"}
`)
	if err == nil || !strings.Contains(err.Error(), "credentials.key") {
		t.Errorf("%v", err)
	}
}

// BenchmarkCallerToken compares, side by side in each iteration, a call
// through the whole pipeline with a static bearer header and one with the
// caller's own OAuth token from the connection's cache (per principal,
// refreshed only when due): the cost of acting as the user.
func BenchmarkCallerToken(b *testing.B) {
	u := newUpstream(b, ok(`{"ok":true}`))
	v, kr := testVault(b)
	m, err := delegate.New(delegate.Options{Vault: v, Keys: kr, PublicURL: "http://127.0.0.1:1"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.SaveTokens(ctx, credentials.Principal(alice), "mine", &credentials.Token{AccessToken: "alice-access-token-0123456789",
		Expiry: time.Now().Add(time.Hour), ConnectedAt: time.Now()}, 0); err != nil {
		b.Fatal(err)
	}
	s := buildWith(b, u, Options{Vault: v, Delegate: m}, `
tools:
  - name: static
    description: A static header.
    request: {url: "$API/x"}
    auth: {bearer: "static-token-0123456789"}
    allow: [127.0.0.1]
    allow_http: true
  - name: mine
    description: The caller's own token.
    request: {url: "$API/x"}
    auth: {oauth: {per_user: true, issuer: "https://as.example.com", client_id: toold}}
    allow: [127.0.0.1]
    allow_http: true
`)
	d := pipeline(b, s)
	static := &dispatch.Request{Tool: "static", Body: []byte(`{}`), RequestID: "bench", Principal: alice}
	mine := &dispatch.Request{Tool: "mine", Body: []byte(`{}`), RequestID: "bench", Principal: alice}
	if env := d.Execute(ctx, mine); !env.Success {
		b.Fatal(env.Error)
	}
	var ts, tm []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if env := d.Execute(ctx, static); !env.Success {
			b.Fatal(env.Error)
		}
		t1 := time.Now()
		if env := d.Execute(ctx, mine); !env.Success {
			b.Fatal(env.Error)
		}
		ts, tm = append(ts, t1.Sub(t0)), append(tm, time.Since(t1))
	}
	ps, pm := p50(ts), p50(tm)
	b.ReportMetric(float64(ps.Nanoseconds())/1000, "static-p50-µs")
	b.ReportMetric(float64(pm.Nanoseconds())/1000, "caller-p50-µs")
	b.ReportMetric(float64((pm-ps).Nanoseconds())/1000, "delta-p50-µs")
}

func p50(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	for i := 1; i < len(s); i++ { // insertion sort: the benchmark's samples are few
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
