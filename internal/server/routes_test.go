package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/oauth/oidctest"
	"github.com/toold/toold/internal/registry"
)

// publicRoutes are the only routes that answer a request without
// credentials when keys or token issuers are configured, each for its
// reason. A route added outside the authenticated groups fails
// TestEveryRouteNeedsCredentials until it is listed here.
var publicRoutes = map[string]string{
	"GET /healthz":                     "liveness probe: an orchestrator has no key",
	"GET /readyz":                      "readiness probe: an orchestrator has no key",
	"GET /openapi.yaml":                "the contract, as public as the docs",
	"GET /":                            "the index: a browser goes on to the console (which signs in), an API client reads where the routes and docs are",
	"GET /auth/session":                "says whether the request is signed in, and where to sign in",
	"GET /console":                     "the console's static page: its scripts call the API with the user's credentials",
	"GET /console/*":                   "the console's static assets",
	"GET " + oauth.MetadataPath:        "protected resource metadata (RFC 9728): how a client learns where to get a token",
	"GET " + oauth.MetadataPath + "/*": "the same metadata, for a resource's path",
	"GET " + oauth.LoginPath:           "sign-in: sends the browser to the issuer",
	"GET " + oauth.CallbackPath:        "sign-in: the issuer sends the browser back",
	"POST /auth/logout":                "sign-out: reads the session cookie itself (CSRF token required)",
	"OPTIONS /tools":                   "CORS preflights carry no credentials",
	"OPTIONS /tools/*":                 "CORS preflight",
	"OPTIONS /executions":              "CORS preflight",
	"OPTIONS /executions/*":            "CORS preflight",
	"OPTIONS /batch":                   "CORS preflight",
	"OPTIONS /artifacts/*":             "CORS preflight",
	"OPTIONS /approvals":               "CORS preflight",
	"OPTIONS /approvals/*":             "CORS preflight",
	"OPTIONS /events":                  "CORS preflight",
	"OPTIONS /audit":                   "CORS preflight",
	"OPTIONS /mcp":                     "CORS preflight",
	"OPTIONS /mcp/{toolset}":           "CORS preflight",
	"GET " + delegate.StartPath:        "connecting to a downstream: a browser opens it; a sealed, short-lived start link names the principal",
	"POST " + delegate.StartPath:       "connecting: the start page's form, bound by the same sealed link and a cookie",
	"GET " + delegate.CallbackPath:     "connecting: the downstream's authorization server sends the browser back; the single-use state binds the code to the principal",
	"OPTIONS /connections":             "CORS preflight",
	"OPTIONS /connections/*":           "CORS preflight",
	"OPTIONS /credentials":             "CORS preflight",
	"OPTIONS /credentials/*":           "CORS preflight",
}

// TestEveryRouteNeedsCredentials (issue 38, item 5) walks the whole
// router — every REST route, /mcp and /mcp/<toolset> with every method
// they take, the sign-in routes — and sends each a request without
// credentials: every one answers 401, except the routes publicRoutes
// lists, which answer without a 401; and every listed route exists, so the
// list stays the router's. With keys only, and with keys and a token
// issuer that signs people in to the console (the real OpenID Provider).
func TestEveryRouteNeedsCredentials(t *testing.T) {
	sets, err := registry.NewToolsets([]registry.Toolset{{Name: "diag", Tools: []string{"echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	keys := []auth.Key{{Name: "ops", SHA256: auth.Hash("toold_walk_key_0123456789abcdef"), Tools: []string{"*"}, Roles: auth.Roles}}
	t.Run("keys", func(t *testing.T) {
		h := newHarness(t, harnessOpts{store: true, mcp: true, toolsets: sets, keys: keys})
		walkUnauthenticated(t, h, false)
	})
	t.Run("keys and an issuer", func(t *testing.T) {
		const resource = "http://127.0.0.1/mcp"
		console := oidctest.Client{ID: "console", Secret: "console-secret", RedirectURIs: []string{"http://127.0.0.1:*/auth/callback"}, Audience: []string{resource}}
		idp := oidctest.Start(t, oidctest.Config{Clients: []oidctest.Client{console}})
		h := newHarness(t, harnessOpts{store: true, mcp: true, toolsets: sets, keys: keys, issuers: oauth.Issuers{{Issuer: idp.Issuer,
			Audience: resource, Allow: []string{"127.0.0.1"}, AllowHTTP: true, Console: oauth.Console{ClientID: "console", ClientSecret: "console-secret"}}}})
		walkUnauthenticated(t, h, true)
	})
}

// walkUnauthenticated sends every route of h's router a request without
// credentials; withIssuer: the sign-in routes must be there too.
func walkUnauthenticated(t *testing.T, h *harness, withIssuer bool) {
	t.Helper()
	seen := map[string]bool{}
	err := chi.Walk(h.srv.router, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := method + " " + route
		seen[key] = true
		path := concrete(route)
		status, header, body := h.rawDo(method, path, "", nil)
		_, public := publicRoutes[key]
		switch {
		case public && status == http.StatusUnauthorized:
			t.Errorf("%s (%s): the public route answered 401: %.200s", key, path, body)
		case !public && status != http.StatusUnauthorized:
			t.Errorf("%s (%s): answered %d without credentials, want 401 (or list it in publicRoutes, with why): %.200s",
				key, path, status, body)
		case !public && !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer"):
			t.Errorf("%s (%s): the 401 has no Bearer challenge: %q", key, path, header.Get("WWW-Authenticate"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range publicRoutes {
		signIn := strings.Contains(key, "/auth/l") || strings.Contains(key, "/auth/callback") || strings.Contains(key, ".well-known")
		if !seen[key] && (withIssuer || !signIn) {
			t.Errorf("publicRoutes lists %s, which the router does not have", key)
		}
	}
	for _, want := range []string{"POST /mcp", "GET /mcp", "DELETE /mcp", "POST /mcp/{toolset}", "POST /tools/{name}/execute", "GET /audit"} {
		if !seen[want] {
			t.Errorf("the walk did not find %s: routes %v", want, slices.Sorted(func(yield func(string) bool) {
				for k := range seen {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
}

// concrete is a path the route pattern matches.
func concrete(route string) string {
	r := strings.NewReplacer("{name}", "echo", "{id}", "0123456789abcdef01234567", "{toolset}", "diag")
	path := r.Replace(route)
	if strings.HasSuffix(path, "/*") {
		path = strings.TrimSuffix(path, "*") + "x"
	}
	return path
}

// TestTwoAuthorizationHeaders: a request with two Authorization headers
// is refused 400 invalid_header, on REST and /mcp, whatever the first one
// holds (a proxy and toold could read different ones).
func TestTwoAuthorizationHeaders(t *testing.T) {
	const good = "toold_two_headers_key_0123456789ab"
	h := newHarness(t, harnessOpts{mcp: true, keys: []auth.Key{{Name: "ops", SHA256: auth.Hash(good), Tools: []string{"*"}}}})
	for _, path := range []string{"/tools", "/mcp"} {
		method, body := "GET", ""
		if path == "/mcp" {
			method, body = "POST", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		}
		req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Add("Authorization", "Bearer "+good)
		req.Header.Add("Authorization", "Bearer someone-else")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		b := string(raw)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, "more than one Authorization header") {
			t.Errorf("%s: %d %s, want 400 naming the two headers", path, resp.StatusCode, b)
		}
	}
	if r := h.do("GET", "/tools", nil, map[string]string{"Authorization": "Bearer " + good}); r.status != http.StatusOK {
		t.Errorf("one header: %d %s", r.status, r.body)
	}
}

// TestNoPrincipalIsAnError: a handler reached without authentication — a
// route mounted outside the guarded group — answers 500 and logs why; it
// is never served as the anonymous local user, who may use every tool.
func TestNoPrincipalIsAnError(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if p, err := principal(httptest.NewRequest("GET", "/tools", nil)); p != nil || err == nil {
		t.Fatalf("principal without authentication: %v %v", p, err)
	}
	for name, hf := range map[string]http.HandlerFunc{"GET /tools": h.srv.listTools, "GET /tools/search": h.srv.searchTools,
		"GET /latency": h.srv.latency, "GET /tools/{name}": h.srv.getTool} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://127.0.0.1/tools/search?q=echo", nil)
		rctx := chi.NewRouteContext()
		rctx.URLParams.Add("name", "echo")
		req = req.WithContext(t.Context())
		req = req.WithContext(contextWithRoute(req, rctx))
		h.srv.frame(hf).ServeHTTP(rec, req)
		if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "system_error") {
			t.Errorf("%s without authentication: %d %s, want 500", name, rec.Code, rec.Body)
		}
	}
	if h.logs.FilterMessage("a handler ran without an authenticated caller").Len() == 0 {
		t.Error("the missing caller was not logged")
	}
}

func contextWithRoute(r *http.Request, rctx *chi.Context) context.Context {
	return context.WithValue(r.Context(), chi.RouteCtxKey, rctx)
}
