package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/oauth"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

type ctxKey int

const keyInfo ctxKey = 0

// reqInfo is the request's state across middleware: who called (set by
// authenticate) and what the access log line reports (filled by handlers).
// One context value, so the request is copied once, not per middleware.
type reqInfo struct {
	id        string
	principal *auth.Principal
	tool      string
	outcome   string
	errType   string
	caller    string
	status    int
	// challenge is the WWW-Authenticate a refusal of the request's
	// credentials carries (see challengeFor).
	challenge string
	// bearer is the caller's access token, when one authenticated the
	// request: for the downstreams that exchange or pass it on (see
	// inbound); never logged.
	bearer string
	// bodyRead: the request's body was read to its end; bodyFailed: it
	// could not be (see send, which then hangs up).
	bodyRead, bodyFailed bool
}

func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(keyInfo).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// errNoPrincipal is a handler asking for the caller of a request that
// authenticate never saw: a route mounted outside the guarded groups.
var errNoPrincipal = errors.New("server: the request has no authenticated caller (is its route outside the authenticated group?)")

// principal is the request's authenticated caller, set by authenticate
// (or mcpGuard, or a sign-in). A request without one is an error, never
// a caller of its own: a route mounted outside the guarded groups must
// not serve anyone as the anonymous local user, who may do everything.
func principal(r *http.Request) (*auth.Principal, error) {
	if p := info(r).principal; p != nil {
		return p, nil
	}
	return nil, errNoPrincipal
}

// caller is principal for a handler: without a caller the request is
// refused (500: a wiring bug, logged) and ok is false.
func (s *Server) caller(w http.ResponseWriter, r *http.Request) (p *auth.Principal, ok bool) {
	p, err := principal(r)
	if err != nil {
		s.noPrincipal(w, r, err)
		return nil, false
	}
	return p, true
}

// chargedCaller is caller for a route that is work the caller makes toold
// do without a call (a search, an artifact's read): it is charged its
// principal's rate (auth.limits.rate), as a call is, before any of it is
// done; past the rate the request is refused (429 principal_rate) and ok
// is false.
func (s *Server) chargedCaller(w http.ResponseWriter, r *http.Request) (p *auth.Principal, ok bool) {
	if p, ok = s.caller(w, r); !ok {
		return nil, false
	}
	if err := s.opts.Dispatcher.Charge(p.Name, 1); err != nil {
		te, _ := tools.AsError(err)
		s.refuse(w, r, "", dispatch.StatusRejected, te)
		return nil, false
	}
	return p, true
}

// noPrincipal refuses a request whose handler found no caller.
func (s *Server) noPrincipal(w http.ResponseWriter, r *http.Request, err error) {
	s.log.Error("a handler ran without an authenticated caller", zap.String("route", routeOf(r)), zap.Error(err))
	s.refuse(w, r, "", dispatch.StatusError, tools.Errorf(tools.SystemError,
		"internal error; the operator can find it in the logs under request id %s", info(r).id))
}

// frame is the one middleware every request passes: it honours a
// well-formed X-Request-ID or makes one (and echoes it), turns a panic in
// toold's own code into a 500 envelope, and writes one access log line. One
// frame rather than a chain of them keeps a request's goroutine shallow:
// calls parked in a bulkhead queue hold that stack until the next
// collection shrinks it.
func (s *Server) frame(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := s.requestID(r.Header.Get("X-Request-ID"))
		w.Header().Set("X-Request-ID", id)
		// One allocation for the request's state, its writer and the
		// writer's controller: they live exactly as long as the request.
		st := &struct {
			ri reqInfo
			sw statusWriter
			rc http.ResponseController
		}{ri: reqInfo{id: id}, sw: statusWriter{ResponseWriter: w, window: s.opts.WriteTimeout}}
		ri, sw := &st.ri, &st.sw
		ctx := context.WithValue(r.Context(), keyInfo, ri)
		var span trace.Span
		if s.opts.Tracer != nil && !probe(r) {
			ctx, span = s.startSpan(ctx, r)
		}
		r = r.WithContext(ctx)
		if sw.window > 0 {
			st.rc = *http.NewResponseController(w)
			sw.rc = &st.rc
		}
		defer s.logRequest(sw, r, ri, start, span)
		defer s.recoverPanic(sw, r, ri)
		next.ServeHTTP(sw, r)
	})
}

// requestID is the request's id: the client's, when it is well-formed
// and the sanitizer finds nothing in it, else a new one. It goes into a
// header, every envelope and every log line of the request: a client's id
// that held a secret (any token is made of the same characters) would be
// written back everywhere.
func (s *Server) requestID(sent string) string {
	if s.acceptableID(sent) {
		return sent
	}
	return newRequestID()
}

// acceptableID reports whether a caller-chosen id (a request id, a
// batch call's id) may be kept and repeated: well-formed, and nothing in
// it the sanitizer would redact.
func (s *Server) acceptableID(id string) bool {
	return validRequestID(id) && s.opts.Dispatcher.RedactText(id) == id
}

// validRequestID accepts 1-128 characters of [A-Za-z0-9._:-], so a client's
// id can be logged and echoed without injecting anything.
func validRequestID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// statusWriter remembers the status written, and gives every write its
// own deadline (Options.WriteTimeout) when window is set.
type statusWriter struct {
	http.ResponseWriter
	status int
	window time.Duration
	rc     *http.ResponseController
}

// writing moves the write deadline to window from now: what bounds a write
// is how long it waits on the client, not how long the response lasted.
func (w *statusWriter) writing() {
	if w.rc != nil {
		_ = w.rc.SetWriteDeadline(time.Now().Add(w.window))
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.writing()
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.writing()
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming handlers flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.writing()
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequest writes the access log line: route pattern, status,
// duration, request id, tool, outcome. Never arguments or outputs: those may
// hold secrets, and the sanitizer is not the log's job.
func (s *Server) logRequest(sw *statusWriter, r *http.Request, ri *reqInfo, start time.Time, span trace.Span) {
	route := routeOf(r)
	status := sw.status
	if ri.status != 0 {
		status = ri.status // 499: written to nobody, but logged
	}
	d := time.Since(start)
	s.metrics.observe(r.Method, route, status, d)
	if span != nil {
		endSpan(span, r.Method, route, status, s.logTool(ri.tool), ri.outcome)
	}
	s.log.Info("request", append(tracing.LogFields(r.Context()),
		zap.String("method", r.Method), zap.String("route", route), zap.Int("status", status),
		zap.Float64("duration_ms", float64(d.Microseconds())/1000), zap.String("request_id", ri.id),
		zap.String("tool", s.logTool(ri.tool)), zap.String("outcome", ri.outcome), zap.String("error_type", ri.errType),
		zap.String("caller", ri.caller))...)
}

// routeOf is the request's route pattern: what logs and audit records
// name a request by, never its path, which holds what the caller typed
// (a tool's name, an id).
func routeOf(r *http.Request) string {
	if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
		return rc.RoutePattern()
	}
	return "unmatched"
}

// auditPath is the request's path as an audit record may hold it: the
// route pattern, with {id} filled in when it is one of toold's ids
// (anything else the caller typed stays out of the log).
func auditPath(r *http.Request) string {
	route := routeOf(r)
	if id := chi.URLParam(r, "id"); executions.ValidID(id) {
		route = strings.Replace(route, "{id}", id, 1)
	}
	return route
}

// logTool is the request's tool as the access log and the span name it:
// a name no tool has is what the caller typed — anything, a token pasted
// into the path included — and is written only redacted and bounded
// (registry.UnknownName).
func (s *Server) logTool(name string) string {
	if name == "" {
		return ""
	}
	return s.opts.Dispatcher.Registry().LogName(name)
}

// recoverPanic turns a panic in toold's own code into a 500 envelope. (Tool
// panics are recovered inside the pipeline.)
func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request, ri *reqInfo) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	s.log.Error("handler panicked", zap.String("request_id", ri.id), zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
	s.refuse(w, r, "", dispatch.StatusError, tools.Errorf(tools.SystemError, "internal error; the operator can find it in the logs under request id %s", ri.id))
}

// authenticate is the REST group's middleware: the origin and Host
// checks, then the caller's credentials; the caller it finds is the
// request's principal. One middleware for the whole group, so a route
// added to it is authenticated whether or not its author thought of it.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.originAllowed(w, r) {
			return
		}
		p, te := s.credentials(r)
		if te != nil {
			s.refuse(w, r, "", dispatch.StatusRejected, te)
			return
		}
		ri := info(r)
		ri.caller, ri.principal = p.Name, p
		next.ServeHTTP(w, s.inbound(r))
	})
}

// role wraps a handler of the authenticated group with a role check: a
// caller without the role gets 403 naming it.
func (s *Server) role(need auth.Role, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := s.caller(w, r)
		if !ok {
			return
		}
		if !p.Has(need) {
			if need != auth.RoleCall { // a key reaching for more than calls is worth an audit record
				s.auditAction(r, "refused", fmt.Sprintf("%s %s: the %s lacks the %s role", r.Method, auditPath(r), p.Kind, need))
			}
			s.insufficientScope(r, p, need)
			s.refuse(w, r, "", dispatch.StatusRejected, missingRole(p, need))
			return
		}
		h(w, r)
	}
}

func missingRole(p *auth.Principal, need auth.Role) *tools.Error {
	if p.Kind == auth.KindToken {
		return tools.NewPermissionError("this token does not grant the %q role", need).WithCode(tools.CodeMissingRole).
			WithSuggestion("ask the issuer for a token with the scope that grants %q (GET %s lists them)", need, oauth.MetadataPath)
	}
	return tools.NewPermissionError("this API key does not have the %q role", need).
		WithCode(tools.CodeMissingRole).WithSuggestion("ask the operator to add %q to the key's roles in auth.keys", need)
}

// originOnly wraps a public handler (publicRoutes) with the origin and
// Host checks alone.
func (s *Server) originOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.originAllowed(w, r) {
			h(w, r)
		}
	}
}

// originAllowed refuses browser requests from origins not on the
// allow-list, and, when no keys are configured, requests whose Host is not a
// loopback name: together they stop a web page (including one whose domain
// was rebound to 127.0.0.1) from driving a toold on the victim's machine.
func (s *Server) originAllowed(w http.ResponseWriter, r *http.Request) bool {
	if te := s.originRefusal(r); te != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, te)
		return false
	}
	s.corsHeaders(w, r)
	return true
}

// originRefusal is originAllowed's decision, for every route that a
// browser could reach (REST and MCP alike).
func (s *Server) originRefusal(r *http.Request) *tools.Error {
	if te := s.foreignOrigin(r); te != nil {
		return te
	}
	if !s.authEnabled() && !s.hostAllowed(r.Host) {
		return hostRefusal(r.Host)
	}
	return nil
}

// foreignOrigin refuses a browser request from an origin not on the
// allow-list. A page toold served itself (the console) is not foreign:
// browsers send Origin on its POSTs, naming the Host it was loaded from.
// Accepting that gives an attacker nothing: a page that reached toold
// under another name (DNS rebinding) is same-origin too, and sends no
// Origin on its GETs either way; what stops it is the Host check below
// (no keys) or the key it does not have.
func (s *Server) foreignOrigin(r *http.Request) *tools.Error {
	o := r.Header.Get("Origin")
	if o != "" && !s.origins[strings.ToLower(o)] && !sameOrigin(o, r.Host) {
		return tools.NewPermissionError("requests from the origin %q are not allowed", o).
			WithCode(tools.CodeOriginNotAllowed).WithSuggestion("add the origin to server.allowed_origins in the config")
	}
	return nil
}

// sameOrigin reports whether origin (scheme://host[:port]) names host, the
// request's Host header.
func sameOrigin(origin, host string) bool {
	scheme, rest, ok := strings.Cut(origin, "://")
	return ok && (scheme == "http" || scheme == "https") && host != "" && strings.EqualFold(rest, host)
}

func hostRefusal(host string) *tools.Error {
	return tools.NewPermissionError("the Host %q is not a loopback name", host).
		WithCode(tools.CodeHostNotAllowed).WithSuggestion("call toold as localhost or 127.0.0.1, add the host to server.allowed_hosts, or configure API keys")
}

// Admin guards the admin listener's handler (metrics, pprof) with the
// API's browser checks: a foreign Origin is refused, and so is a Host that
// is neither a loopback name, nor in server.allowed_hosts, nor an IP
// address. The admin listener takes no key, so its Host check applies
// whether or not the API has keys. An address passes it: DNS rebinding
// needs a name (a page can only reach an address by its own origin), and
// Prometheus scrapes pods by address.
func (s *Server) Admin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		te := s.foreignOrigin(r)
		if te == nil && !s.hostAllowed(r.Host) && !ipHost(r.Host) {
			te = hostRefusal(r.Host)
		}
		if te != nil {
			s.refuse(w, r, "", dispatch.StatusRejected, te)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ipHost reports whether a Host header names an IP address.
func ipHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return net.ParseIP(strings.Trim(host, "[]")) != nil
}

// corsHeaders lets an allowed origin read the answer.
func (s *Server) corsHeaders(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Add("Vary", "Origin")
	}
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostOnly(hostport)
	return loopbackName(host) || s.hosts[host] || s.hosts[strings.ToLower(hostport)]
}

// hostOnly is a Host header's host, lower case, without port or brackets.
func hostOnly(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.Trim(host, "[]"))
}

// loopbackName reports whether a host (hostOnly's) names this machine.
func loopbackName(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, X-Request-ID, Toold-Timeout, Toold-Confirm, "+
		"Prefer, Idempotency-Key, Toold-Turn, Last-Event-ID, Mcp-Protocol-Version, Mcp-Session-Id, Traceparent, Tracestate, Range")
	h.Set("Access-Control-Expose-Headers", "X-Request-ID, Retry-After, Location, Preference-Applied, Idempotent-Replayed, "+
		"Mcp-Session-Id, WWW-Authenticate, Content-Range, Accept-Ranges")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// refuse answers with a failure envelope built outside the pipeline.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, tool string, status dispatch.Status, err *tools.Error) {
	env := dispatch.Failure(info(r).id, tool, status, err)
	env.TraceID, env.TraceSampled = tracing.TraceID(r.Context())
	s.writeEnvelope(w, r, env)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.refuse(w, r, "", dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "no route %s %s", r.Method, r.URL.Path).
		WithCode(tools.CodeNoRoute).WithSuggestion("the API is described at GET /openapi.yaml"))
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "method %s is not allowed on %s", r.Method, r.URL.Path).
		WithCode(tools.CodeMethodNotAllowed).WithSuggestion("the API is described at GET /openapi.yaml"))
}
