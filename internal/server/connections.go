package server

import (
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/credentials"
	"github.com/toold/toold/internal/delegate"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// Acting as the user (internal/credentials, internal/delegate): each
// caller's own credentials and OAuth connections. The routes that read or
// change a caller's own need their credentials (and the call role, as
// calls are what use them; a shared connection needs admin); the consent
// pages a browser opens without toold's credentials are bound to the
// caller by what they carry (a sealed start URL, a single-use state and a
// cookie), not by a key.

// credentialRoutes mounts them: in one block, so the router's shape
// stays easy to see.
func (s *Server) credentialRoutes(r chi.Router) {
	r.Get("/connections", s.role(auth.RoleCall, s.listConnections))
	r.Get("/connections/{name}/authorize", s.role(auth.RoleCall, s.authorizeConnection))
	r.Delete("/connections/{name}", s.role(auth.RoleCall, s.disconnect))
	r.Get("/credentials", s.role(auth.RoleCall, s.listCredentials))
	r.Put("/credentials/{name}", s.role(auth.RoleCall, s.putCredential))
	r.Delete("/credentials/{name}", s.role(auth.RoleCall, s.deleteCredential))
}

// consentRoutes are the public legs of connecting a principal to a
// downstream: a browser opens them without toold's credentials. The start
// page and its form are bound to the principal by a signed, short-lived
// start link, the callback by the signed, single-use state. (Their CORS
// preflights are publicRoutes', with every other route's.)
func (s *Server) consentRoutes(r chi.Router) {
	r.Get(delegate.StartPath, s.originOnly(s.connectPage))
	r.Post(delegate.StartPath, s.originOnly(s.connectBegin))
	r.Get(delegate.CallbackPath, s.originOnly(s.connectCallback))
}

func noVault() *tools.Error {
	return tools.Errorf(tools.NotFound, "this toold keeps no per-user credentials").WithCode(tools.CodeNoVault).
		WithSuggestion("the operator sets credentials.key (toold credentials keygen makes one) with the state store on")
}

// vaultError answers a vault or delegation failure.
func (s *Server) vaultError(w http.ResponseWriter, r *http.Request, err error) {
	if te := delegate.ToolError(err, "this route"); te != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, te)
		return
	}
	s.log.Error("the credentials vault failed", zap.String("request_id", info(r).id), zap.Error(err))
	te := tools.Errorf(tools.OverloadError, "the credentials vault could not be read or written").WithCode(tools.CodeStoreUnavailable).
		WithSuggestion("retry in a moment").WithRetryAfter(time.Second)
	s.refuse(w, r, "", dispatch.StatusRejected, te)
}

// listConnections is GET /connections: every OAuth connection, as the
// caller sees it (their own tokens' scopes and expiry, never a token), and
// where to connect.
func (s *Server) listConnections(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	m := s.opts.Delegate
	if m == nil {
		writeNoStore(w, http.StatusOK, map[string]any{"connections": []any{}})
		return
	}
	list, err := m.List(r.Context(), p.Who())
	if err != nil {
		s.vaultError(w, r, err)
		return
	}
	for i := range list {
		if list[i].Shared && !p.Has(auth.RoleAdmin) {
			list[i].AuthorizeURL = "" // a shared connection is an admin's to make
		}
	}
	writeNoStore(w, http.StatusOK, map[string]any{"connections": list})
}

func noConnection(name string) *tools.Error {
	return tools.Errorf(tools.NotFound, "no OAuth connection is named %q", clipName(name)).WithCode(tools.CodeNoConnection).
		WithSuggestion("GET /connections lists them")
}

func clipName(s string) string {
	if len(s) > 64 {
		return s[:64]
	}
	return s
}

// sharedNeedsAdmin refuses a caller without the admin role the
// connection every caller shares.
func (s *Server) sharedNeedsAdmin(w http.ResponseWriter, r *http.Request, name string) bool {
	p, ok := s.caller(w, r)
	if !ok {
		return true
	}
	c := s.opts.Delegate.Connection(name)
	if c == nil || c.PerUser() || p.Has(auth.RoleAdmin) {
		return false
	}
	s.refuse(w, r, "", dispatch.StatusRejected, missingRole(p, auth.RoleAdmin))
	return true
}

// authorizeConnection is GET /connections/{name}/authorize: to the
// consent page for the caller, which sends the browser on to the
// authorization server.
func (s *Server) authorizeConnection(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "name")
	if s.opts.Delegate == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, noConnection(name))
		return
	}
	if s.sharedNeedsAdmin(w, r, name) {
		return
	}
	u, err := s.opts.Delegate.AuthorizeURL(p.Who(), name)
	if errors.Is(err, delegate.ErrNoConnection) {
		s.refuse(w, r, "", dispatch.StatusNotFound, noConnection(name))
		return
	}
	if err != nil {
		s.vaultError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusFound)
}

// disconnect is DELETE /connections/{name}: the caller's tokens are
// revoked at the authorization server (RFC 7009, where it offers it) and
// forgotten.
func (s *Server) disconnect(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "name")
	if s.opts.Delegate == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, noConnection(name))
		return
	}
	if s.sharedNeedsAdmin(w, r, name) {
		return
	}
	had, err := s.opts.Delegate.Disconnect(r.Context(), p.Who(), name)
	switch {
	case errors.Is(err, delegate.ErrNoConnection):
		s.refuse(w, r, "", dispatch.StatusNotFound, noConnection(name))
	case err != nil:
		s.vaultError(w, r, err)
	case !had:
		s.refuse(w, r, "", dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "the caller has not connected %q", name).
			WithCode(tools.CodeNoConnection).WithSuggestion("GET /connections lists your connections"))
	default:
		s.auditAction(r, "credential_remove", "oauth:"+name)
		w.WriteHeader(http.StatusNoContent)
	}
}

// The consent pages: plain HTML, no script, never framed.
var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · toold</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:3em auto;padding:0 1em;color:#222}
.who{font-weight:600}button{font:inherit;padding:.5em 1.2em}.err{color:#a00}</style></head>
<body><h1>{{.Title}}</h1>
{{if .Error}}<p class="err" id="error" data-reason="{{.Reason}}">{{.Error}}</p>{{end}}
{{if .Flow}}<p>toold asks you to connect <span class="who" id="connection">{{.Connection}}</span>, so that its tools call it as
<span class="who" id="principal">{{.Who}}</span>.</p>
<p>If that is not you, or you did not ask for this, close this page.</p>
<form method="post" action="{{.Action}}"><input type="hidden" name="flow" value="{{.Flow}}">
<button type="submit" id="continue">Continue to the authorization server</button></form>{{end}}
{{if .Done}}<p id="done">Connected <span class="who">{{.Connection}}</span> for <span class="who">{{.Who}}</span>{{if .Scopes}}
(scopes: {{.Scopes}}){{end}}. You can close this window and call the tool again.</p>{{end}}
</body></html>
`))

type consentView struct {
	Title, Error, Reason, Flow, Action, Connection, Who, Scopes string
	Done                                                        bool
}

func (s *Server) writePage(w http.ResponseWriter, status int, v consentView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = consentPage.Execute(w, v)
}

// consentFailure shows why a consent step stopped.
func (s *Server) consentFailure(w http.ResponseWriter, r *http.Request, err error) {
	var ce *delegate.ConsentError
	if errors.As(err, &ce) {
		s.log.Info("a consent step stopped", zap.String("reason", ce.Reason), zap.String("request_id", info(r).id))
		s.writePage(w, http.StatusBadRequest, consentView{Title: "Not connected", Error: ce.Description, Reason: ce.Reason})
		return
	}
	s.log.Warn("a consent step failed", zap.String("request_id", info(r).id), zap.Error(err))
	s.writePage(w, http.StatusServiceUnavailable, consentView{Title: "Not connected", Reason: "unavailable",
		Error: "the authorization server could not be reached; try again in a moment"})
}

// connectPage is GET /connections/start?flow=…: the page a refusal's
// authorize_url opens, naming the connection and whom it is for, with the
// button that begins the authorization.
func (s *Server) connectPage(w http.ResponseWriter, r *http.Request) {
	if s.opts.Delegate == nil {
		s.consentFailure(w, r, &delegate.ConsentError{Reason: "invalid_link", Description: "this toold has no connections"})
		return
	}
	flow := r.URL.Query().Get("flow")
	p, err := s.opts.Delegate.Open(flow)
	if err != nil {
		s.consentFailure(w, r, err)
		return
	}
	s.writePage(w, http.StatusOK, consentView{Title: "Connect " + p.Connection, Flow: flow, Action: delegate.StartPath,
		Connection: p.Connection, Who: p.Who})
}

// connectBegin is POST /connections/start: the flow is stored, the browser
// is bound to it by a cookie and sent to the authorization server. A post
// from another site's page carries its Origin and is refused before.
func (s *Server) connectBegin(w http.ResponseWriter, r *http.Request) {
	if s.opts.Delegate == nil {
		s.consentFailure(w, r, &delegate.ConsentError{Reason: "invalid_link", Description: "this toold has no connections"})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		s.consentFailure(w, r, &delegate.ConsentError{Reason: "invalid_request", Description: "send the page's form"})
		return
	}
	to, cookie, err := s.opts.Delegate.Begin(r.Context(), r.PostForm.Get("flow"), secure(r))
	if err != nil {
		s.consentFailure(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, cookie)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// connectCallback is GET /connections/callback: the authorization
// server's answer, traded for the caller's tokens.
func (s *Server) connectCallback(w http.ResponseWriter, r *http.Request) {
	if s.opts.Delegate == nil {
		s.consentFailure(w, r, &delegate.ConsentError{Reason: "invalid_state", Description: "this toold has no connections"})
		return
	}
	done, err := s.opts.Delegate.Finish(r.Context(), r, secure(r))
	if err != nil {
		s.consentFailure(w, r, err)
		return
	}
	http.SetCookie(w, done.ClearCookie)
	ri := info(r)
	if done.Who != nil {
		ri.caller = done.Who.Name
	}
	s.writePage(w, http.StatusOK, consentView{Title: "Connected", Done: true, Connection: done.Connection, Who: done.WhoName,
		Scopes: strings.Join(done.Scopes, " ")})
}

// listCredentials is GET /credentials: the caller's own, by name and
// dates; never a value.
func (s *Server) listCredentials(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	v := s.opts.Credentials
	if v == nil {
		writeNoStore(w, http.StatusOK, map[string]any{"credentials": []any{}})
		return
	}
	list, err := v.Secrets(r.Context(), p.Who())
	if err != nil {
		s.vaultError(w, r, err)
		return
	}
	writeNoStore(w, http.StatusOK, map[string]any{"credentials": list})
}

// putCredential is PUT /credentials/{name} {"value": "..."}: the caller's
// own secret, sealed; the answer names it, never repeats it.
func (s *Server) putCredential(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "name")
	if s.opts.Credentials == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, noVault())
		return
	}
	if !credentials.ValidName(name) {
		s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "a credential's name is 1-64 of a-z A-Z 0-9 _ . -").
			WithCode(tools.CodeInvalidParameter).WithSuggestion("name it as the tool's ${user:name} does"))
		return
	}
	s.withBody(w, r, "", func(body []byte) {
		var in struct {
			Value string `json:"value"`
		}
		if terr := decodeStrict(body, 1, &in); terr != nil {
			s.refuse(w, r, "", dispatch.StatusRejected, terr.WithSuggestion(`send {"value": "..."}`))
			return
		}
		if in.Value == "" || len(in.Value) > credentials.MaxSecretBytes {
			s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "value must be 1 to %d bytes", credentials.MaxSecretBytes).
				WithCode(tools.CodeInvalidJSON).WithSuggestion(`send {"value": "..."}`))
			return
		}
		sec, err := s.opts.Credentials.PutSecret(r.Context(), p.Who(), name, []byte(in.Value))
		if err != nil {
			s.vaultError(w, r, err)
			return
		}
		s.auditAction(r, "credential_connect", "secret:"+name)
		writeNoStore(w, http.StatusOK, sec)
	})
}

// deleteCredential is DELETE /credentials/{name}.
func (s *Server) deleteCredential(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	name := chi.URLParam(r, "name")
	if s.opts.Credentials == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, noVault())
		return
	}
	had, err := s.opts.Credentials.DeleteSecret(r.Context(), p.Who(), name)
	switch {
	case err != nil:
		s.vaultError(w, r, err)
	case !had:
		s.refuse(w, r, "", dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "the caller has no credential named %q", clipName(name)).
			WithCode(tools.CodeNoConnection).WithSuggestion("GET /credentials lists yours"))
	default:
		s.auditAction(r, "credential_remove", "secret:"+name)
		w.WriteHeader(http.StatusNoContent)
	}
}

// inbound is r with the caller's own access token in its context, for a
// call to a downstream that exchanges or passes it on (only when one
// does: the copy costs an allocation).
func (s *Server) inbound(r *http.Request) *http.Request {
	if t := info(r).bearer; t != "" && s.opts.Delegate != nil && s.opts.Delegate.WantsInbound() {
		return r.WithContext(delegate.WithInboundToken(r.Context(), t))
	}
	return r
}

func writeNoStore(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, v)
}
