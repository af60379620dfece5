package server

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/tools"
)

// The console's single sign-on (internal/oauth login.go, session.go): GET
// /auth/login sends the browser to the issuer, GET /auth/callback comes
// back with a session cookie, GET /auth/session says who is signed in (and
// the CSRF token), POST /auth/logout ends it. A session authenticates the
// API's routes as a bearer token does, for requests that send no
// Authorization header; those that are not GETs must carry the CSRF token.

// ssoRoutes mounts the sign-in routes, when an issuer has a console
// client. (GET /auth/session is always served: without single sign-on it
// says so, and the console shows the key form alone.)
func (s *Server) ssoRoutes(r chi.Router) {
	if len(s.opts.OAuth.SignInIssuers()) == 0 {
		return
	}
	r.Get(oauth.LoginPath, s.originOnly(s.signIn))
	r.Get(oauth.CallbackPath, s.originOnly(s.signInCallback))
	r.Post("/auth/logout", s.originOnly(s.signOut))
}

// secure reports whether cookies for this request must be Secure: over
// TLS, or under any name that is not loopback's (toold behind a proxy that
// terminates TLS).
func secure(r *http.Request) bool { return r.TLS != nil || !loopbackName(hostOnly(r.Host)) }

// signIn is GET /auth/login?issuer=N&return=/console/...
func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	i, _ := strconv.Atoi(r.URL.Query().Get("issuer"))
	to, cookies, err := s.opts.OAuth.BeginSignIn(r.Context(), i, r.Host, secure(r), r.URL.Query().Get("return"))
	if err != nil {
		s.refuseSignIn(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	for _, c := range cookies {
		http.SetCookie(w, c)
	}
	http.Redirect(w, r, to, http.StatusFound)
}

// signInCallback is GET /auth/callback: the issuer's answer. A sign-in
// that fails sends the browser back to the console saying why.
func (s *Server) signInCallback(w http.ResponseWriter, r *http.Request) {
	sec := secure(r)
	w.Header().Set("Cache-Control", "no-store")
	for _, c := range oauth.ClearLogin(sec) {
		http.SetCookie(w, c)
	}
	cookie, to, p, err := s.opts.OAuth.FinishSignIn(r.Context(), r, sec)
	var se *oauth.SignInError
	if errors.As(err, &se) {
		s.log.Info("a console sign-in failed", zap.String("code", se.Code), zap.String("reason", se.Description))
		http.Redirect(w, r, "/console/?signin_error="+url.QueryEscape(se.Code), http.StatusSeeOther)
		return
	}
	if err != nil {
		s.refuseSignIn(w, r, err)
		return
	}
	http.SetCookie(w, cookie)
	ri := info(r)
	ri.caller, ri.principal = p.Name, p
	s.auditAction(r, "sign_in", "the console")
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// sessionView is GET /auth/session's answer.
type sessionView struct {
	SignedIn  bool           `json:"signed_in"`
	Principal *auth.Identity `json:"principal,omitempty"`
	Roles     []auth.Role    `json:"roles,omitempty"`
	ExpiresAt *time.Time     `json:"expires_at,omitempty"`
	CSRFToken string         `json:"csrf_token,omitempty"`
	SignIn    []signInOption `json:"sign_in"`
	// NoCredentials: toold has no API keys and no token issuers, so a
	// local caller needs no key (and the console shows no key box).
	NoCredentials bool `json:"no_credentials,omitempty"`
	// ApprovalsOff says, in one line, why no one can decide an approval
	// here and what to set: without keys only approvals.self_approval lets
	// the local user decide.
	ApprovalsOff string `json:"approvals_off,omitempty"`
}

type signInOption struct {
	Issuer string `json:"issuer"`
	URL    string `json:"url"`
}

// session is GET /auth/session: who is signed in, their roles and the
// CSRF token the console sends with its decisions; and where to sign in.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	v := sessionView{SignIn: []signInOption{}}
	for i, iss := range s.opts.OAuth.SignInIssuers() {
		v.SignIn = append(v.SignIn, signInOption{Issuer: iss, URL: oauth.LoginPath + "?issuer=" + strconv.Itoa(i) + "&return=%2Fconsole%2F"})
	}
	sess, err := s.opts.OAuth.Session(r.Context(), r, secure(r))
	if err != nil {
		s.refuseSignIn(w, r, err)
		return
	}
	if sess != nil {
		exp := sess.Expires.UTC()
		v.SignedIn, v.Principal, v.Roles, v.ExpiresAt, v.CSRFToken = true, &sess.Principal.Identity, sess.Principal.Roles(), &exp, sess.CSRF
	}
	if !s.authEnabled() {
		v.NoCredentials = true
		if !s.opts.SelfApproval {
			v.ApprovalsOff = approvalsOff
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, v)
}

// approvalsOff is why a toold without credentials cannot decide an
// approval, and the two ways to change it.
const approvalsOff = "Approvals are off: toold has no API keys and approvals.self_approval is off, so no one can approve " +
	"a call here. Set approvals.self_approval: true to approve from this console, or configure auth.keys with the approve role."

// signOut is POST /auth/logout: the session is revoked on every replica
// (until it would have expired: a copy of the cookie is good for nothing
// from now on), and the cookie is cleared. A signed-in request must carry
// the CSRF token (another site cannot sign you out). A session that
// cannot be revoked (the store is away) is answered 503 — the cookie is
// cleared all the same, but a copy would still work, and the person is
// told so.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	sess, err := s.opts.OAuth.Session(r.Context(), r, secure(r))
	if err == nil && sess != nil && !sess.CheckCSRF(r) {
		s.refuse(w, r, "", dispatch.StatusRejected, csrfRefusal())
		return
	}
	http.SetCookie(w, oauth.ClearSession(secure(r)))
	w.Header().Set("Cache-Control", "no-store")
	if err == nil && sess != nil {
		err = s.opts.OAuth.SignOut(r.Context(), sess)
		if err == nil {
			ri := info(r)
			ri.caller, ri.principal = sess.Principal.Name, sess.Principal
			s.auditAction(r, "sign_out", "the console")
		}
	}
	if errors.Is(err, oauth.ErrRevocationsUnavailable) {
		te := tools.Errorf(tools.OverloadError, "the session could not be signed out everywhere: %v", err).WithCode(tools.CodeStoreUnavailable).
			WithSuggestion("retry in a moment; until then a copy of the session's cookie stays good until it expires")
		te.RetryAfter = 5 * time.Second
		s.refuse(w, r, "", dispatch.StatusRejected, te)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// sessionPrincipal authenticates a request by its session cookie; ok
// false when it has none.
func (s *Server) sessionPrincipal(r *http.Request) (*auth.Principal, *tools.Error, bool) {
	sess, err := s.opts.OAuth.Session(r.Context(), r, secure(r))
	if errors.Is(err, oauth.ErrRevocationsUnavailable) {
		te := tools.Errorf(tools.OverloadError, "the session could not be checked: %v", err).WithCode(tools.CodeStoreUnavailable).
			WithSuggestion("retry in a moment")
		te.RetryAfter = 5 * time.Second
		return nil, te, true
	}
	if err != nil {
		te := tools.Errorf(tools.OverloadError, "the session's issuer could not be reached to verify it").WithCode(tools.CodeIssuerUnavailable).
			WithSuggestion("retry in a moment")
		te.RetryAfter = 5 * time.Second
		return nil, te, true
	}
	if sess == nil {
		return nil, nil, false
	}
	if !sess.CheckCSRF(r) {
		return nil, csrfRefusal(), true
	}
	return sess.Principal, nil, true
}

func csrfRefusal() *tools.Error {
	return tools.NewPermissionError("the request is authenticated by a session cookie but carries no valid %s", oauth.CSRFHeader).
		WithCode(tools.CodeCSRF).WithSuggestion("send the csrf_token GET /auth/session gives in the %s header", oauth.CSRFHeader)
}

// refuseSignIn answers a sign-in route's failure: the issuer unreachable
// (503), or no such issuer (404).
func (s *Server) refuseSignIn(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, oauth.ErrRevocationsUnavailable) {
		te := tools.Errorf(tools.OverloadError, "the session could not be checked: %v", err).WithCode(tools.CodeStoreUnavailable).
			WithSuggestion("retry in a moment")
		te.RetryAfter = 5 * time.Second
		s.refuse(w, r, "", dispatch.StatusRejected, te)
		return
	}
	var se *oauth.SignInError
	if errors.As(err, &se) {
		s.refuse(w, r, "", dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "%s", se.Description).WithCode(tools.CodeNoIssuer).
			WithSuggestion("GET /auth/session lists the issuers to sign in with"))
		return
	}
	s.log.Warn("a console sign-in could not reach its issuer", zap.Error(err))
	te := tools.Errorf(tools.OverloadError, "the issuer could not be reached").WithCode(tools.CodeIssuerUnavailable).
		WithSuggestion("retry in a moment; the operator can find the cause in toold's log")
	te.RetryAfter = 5 * time.Second
	s.refuse(w, r, "", dispatch.StatusRejected, te)
}
