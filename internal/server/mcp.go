package server

import (
	"net/http"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/tools"
)

// mcpGuard is the MCP group's middleware: it guards /mcp exactly as
// authenticate guards the REST routes — origin and Host checks, then the
// caller's credentials, and the call role — so REST and MCP refuse the
// same requests; a refusal is written as a JSON-RPC error, which MCP
// clients show, with the status the one table gives. An accepted request
// counts as an execution for the drain.
func (s *Server) mcpGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		if te := s.originRefusal(r); te != nil {
			s.refuseMCP(w, r, te)
			return
		}
		p, te := s.credentials(r)
		if te != nil {
			s.refuseMCP(w, r, te)
			return
		}
		ri.caller, ri.principal = p.Name, p
		if !p.Has(auth.RoleCall) {
			s.insufficientScope(r, p, auth.RoleCall)
			s.refuseMCP(w, r, missingRole(p, auth.RoleCall))
			return
		}
		s.corsHeaders(w, r)
		if !s.admit() {
			s.refuseMCP(w, r, drainingError())
			return
		}
		defer s.done()
		s.mcpActive.Add(1)
		defer s.mcpActive.Add(-1)
		ctx := mcpserver.WithRequestID(auth.NewContext(s.inbound(r).Context(), p), ri.id)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func (s *Server) refuseMCP(w http.ResponseWriter, r *http.Request, te *tools.Error) {
	env := dispatch.Failure(info(r).id, "", dispatch.StatusRejected, te)
	s.opts.Dispatcher.Redact(env) // as envelopeReply does: the message may quote the request
	status := httpStatus(env)
	ri := info(r)
	ri.outcome, ri.errType = string(env.Status), string(te.Kind)
	if c := s.challengeFor(r, status); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
	if te.RetryAfter > 0 {
		w.Header().Set("Retry-After", retryAfterSeconds(te.RetryAfter))
	}
	msg := env.Error.Message
	if env.Error.Suggestion != "" {
		msg += "; " + env.Error.Suggestion
	}
	if reqbody.Unread(r) { // refused before its body was read: hang up (see send)
		w.Header().Set("Content-Type", "application/json")
		if s.bodies.HangUp(w, status, mcpserver.ErrorBody(msg)) {
			ri.status = status
			return
		}
	}
	mcpserver.WriteError(w, status, msg)
}

// WaitMCP waits, at most d, until no /mcp request is being served. The
// drain cancels MCP calls first and waits here before it cancels the HTTP
// requests: the SDK stops writing a response once its request's context
// ends, so an MCP call cut by the drain must be answered before that.
func (s *Server) WaitMCP(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.mcpActive.Load() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}
