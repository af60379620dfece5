package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/metrics"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/reqbody"
	"github.com/toold/toold/internal/tools"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.Draining() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
		return
	}
	if st := s.opts.Store; st != nil {
		if err := st.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "store_unavailable", "detail": err.Error()})
			return
		}
	}
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "detail": err.Error()})
			return
		}
	}
	if s.opts.StuckCalls != nil {
		if stuck := s.opts.StuckCalls(); len(stuck) > 0 {
			writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "stuck": stuck,
				"detail": "calls of these tools ignored their deadline and still run; see toold_tool_stuck and the log"})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.opts.OpenAPI)
}

// visible returns the tools the caller sees: a key only its tools, and
// with a policy only those it may list.
func (s *Server) visible(p *auth.Principal, r *http.Request) []*registry.Entry {
	return s.opts.Dispatcher.Registry().Visible(s.view(p, r, nil))
}

// entry resolves {name} for the caller; a tool the caller may not use is
// reported as absent, so a key cannot probe what other keys may call.
func (s *Server) entry(w http.ResponseWriter, r *http.Request) (*registry.Entry, bool) {
	name := s.toolName(r)
	info(r).tool = name
	p, ok := s.caller(w, r)
	if !ok {
		return nil, false
	}
	e, ok := s.opts.Dispatcher.Registry().Lookup(name)
	if !ok || !s.view(p, r, nil).Shows(e) {
		s.refuse(w, r, name, dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "there is no tool named %q", name).
			WithSuggestion("GET /tools lists every tool"))
		return nil, false
	}
	return e, true
}

// toolName is the tool {name} names, by its canonical name: a caller may
// use the function name the openai and anthropic listings show.
func (s *Server) toolName(r *http.Request) string {
	return s.opts.Dispatcher.Registry().Canonical(chi.URLParam(r, "name"))
}

func (s *Server) getTool(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.entry(w, r); ok {
		writeJSON(w, http.StatusOK, e.Item())
	}
}

// latency is GET /latency: each visible tool's latency as this replica
// measured it since start, beside its target and max. Empty when the
// server was built without measurements.
func (s *Server) latency(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	out := map[string]metrics.Measured{}
	if s.opts.Measured != nil {
		for _, e := range s.visible(p, r) {
			if m, ok := s.opts.Measured(e); ok {
				out[e.Spec.Name] = m
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tools": out})
}

// getSchema serves the parameters schema byte for byte as the registry
// compiled it: what a model is shown is what validation uses.
func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.entry(w, r); ok {
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(e.Spec.Parameters)
	}
}

// smallBody is the largest body read before its call is admitted. It
// costs little (the shared byte budget bounds such bodies too), and once a
// body is read net/http watches the connection, so a caller that leaves
// while queued leaves the queue at once; a larger body is read only once
// its call has a slot.
const smallBody = 16 << 10

// execute is POST /tools/{name}/execute. Its headers are checked first.
// A large body (or one of unknown length) is read only once the call is
// admitted to its tool's bulkhead (or refused, or queued), by the call's
// deadline: a call that cannot run costs no body, and the large bodies
// read at once are bounded by the slots. An async call runs later and is
// admitted then: now only the byte budget bounds its body.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	name := s.toolName(r)
	info(r).tool = name
	if !s.admit() {
		s.refuse(w, r, name, dispatch.StatusRejected, drainingError())
		return
	}
	defer s.done()
	req, o, terr := s.executeHeaders(r, name)
	if terr != nil {
		s.refuse(w, r, name, dispatch.StatusRejected, terr)
		return
	}
	if o.pref.async || r.ContentLength >= 0 && r.ContentLength <= smallBody {
		s.readThen(w, r, name, time.Time{}, func(body []byte) {
			req.Body = body
			s.executeBody(w, r, req, o)
		})
		return
	}
	t, env := s.opts.Dispatcher.Admit(r.Context(), req)
	if env != nil {
		s.writeEnvelope(w, r, env)
		return
	}
	defer t.Release() // when no call took it: a refused body, a replayed answer
	s.readThen(w, r, name, t.Deadline(), func(body []byte) {
		req.Body, req.Ticket = body, t
		s.executeBody(w, r, req, o)
	})
}

// executeHeaders is the dispatch request of an execute call, without its
// body, and its execution headers.
func (s *Server) executeHeaders(r *http.Request, name string) (*dispatch.Request, callOptions, *tools.Error) {
	var o callOptions
	if terr := contentType(r); terr != nil {
		return nil, o, terr
	}
	req, terr := s.pipelineRequest(r, name, nil)
	if terr == nil && wantsExecutions(r) {
		o, terr = s.callOptions(r)
	}
	return req, o, terr
}

func (s *Server) executeBody(w http.ResponseWriter, r *http.Request, req *dispatch.Request, o callOptions) {
	if wantsExecutions(r) {
		s.executeWith(w, r, req, o)
		return
	}
	if !wantsStream(r) {
		s.send(w, r, s.runSync(r, req))
		return
	}
	ri := info(r)
	stream := newEventStream(w)
	req.OnStart = func() { stream.open(ri.id, req.Tool) }
	req.Emit = stream.output
	env := s.opts.Dispatcher.Execute(r.Context(), req)
	ri.outcome = string(env.Status)
	if env.Error != nil {
		ri.errType = string(env.Error.Type)
	}
	switch {
	case env.Status == dispatch.StatusWaiting && stream.out != nil:
		s.streamParked(r, stream, req, env)
	case env.Status == dispatch.StatusWaiting: // an approval: the tool never started
		s.send(w, r, s.parked(r, req, env))
	case !stream.finish(env):
		s.writeEnvelope(w, r, env)
	}
}

// contentType checks that a request with a body sends JSON (with charset
// UTF-8, if any): a header check, made before the request is admitted or
// its body read. An empty body means "no arguments".
func contentType(r *http.Request) *tools.Error {
	if r.ContentLength == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" { // what nearly every client sends: no parse, no map
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
		return tools.Errorf(tools.ValidationError, "the body must be JSON, sent as Content-Type: application/json (got %q)", ct).
			WithCode(tools.CodeUnsupportedMediaType).WithSuggestion("add the header \"Content-Type: application/json\"")
	}
	return nil
}

// readThen reads the body under the shared byte budget, by deadline (zero:
// the body timeout from now), and calls h with it; the body's bytes go
// back to the budget when h returns. A body that cannot be read is
// refused, and the connection closed (send): the rest of it was not read.
func (s *Server) readThen(w http.ResponseWriter, r *http.Request, tool string, deadline time.Time, h func(body []byte)) {
	b, err := s.bodies.Read(w, r, deadline)
	if err != nil {
		info(r).bodyFailed = true
		s.refuse(w, r, tool, dispatch.StatusRejected, s.bodyError(err))
		return
	}
	info(r).bodyRead = true
	defer b.Release()
	h(b.Data)
}

// bodyError is the refusal of a body that was not read.
func (s *Server) bodyError(err error) *tools.Error {
	var be *reqbody.Error
	if !errors.As(err, &be) {
		be = &reqbody.Error{Reason: reqbody.ReasonUnreadable}
	}
	switch be.Reason {
	case reqbody.ReasonTooLarge:
		return tools.Errorf(tools.ValidationError, "the body is larger than the %d-byte limit", s.bodies.MaxBytes()).
			WithCode(tools.CodeBodyTooLarge).WithSuggestion("send smaller arguments; large content belongs in files the tool reads")
	case reqbody.ReasonBudget:
		e := tools.Errorf(tools.OverloadError, "toold holds as many request bodies as its memory budget allows").
			WithCode(tools.CodeBodyBudget).WithSuggestion("retry in a moment")
		e.RetryAfter = time.Second
		return e
	case reqbody.ReasonTimeout:
		return tools.Errorf(tools.ValidationError, "the body did not arrive in time (toold waits %v for it, and no longer than the call's timeout)",
			s.bodies.Timeout()).WithCode(tools.CodeBodyTimeout).WithSuggestion("send the whole body at once, right after the headers")
	}
	return tools.Errorf(tools.ValidationError, "reading the body failed").WithCode(tools.CodeBodyUnreadable)
}

// requestedTimeout reads Toold-Timeout: a Go duration ("2s", "500ms") or
// whole milliseconds. It may only shorten the tool's timeout.
func requestedTimeout(r *http.Request) (time.Duration, *tools.Error) {
	v := r.Header.Get("Toold-Timeout")
	if v == "" {
		return 0, nil
	}
	d, err := parseDuration(v, time.Millisecond)
	if err != nil || d <= 0 {
		return 0, badHeader("Toold-Timeout", strconv.Quote(v)+" is not a positive duration",
			"use a duration such as 2s or 500ms, or whole milliseconds")
	}
	return d, nil
}

// wwwAuthenticate is the challenge of every 401: a Bearer API key.
const wwwAuthenticate = `Bearer realm="toold"`

// writeEnvelope writes an envelope with the status the table gives it.
func (s *Server) writeEnvelope(w http.ResponseWriter, r *http.Request, env *dispatch.Envelope) {
	s.send(w, r, s.envelopeReply(env, httpStatus(env)))
}

// reply is an answer before it is written: the idempotency layer stores
// and replays it whole.
type reply struct {
	status   int
	body     []byte
	location string
	// env is the envelope the body holds, if it holds one: it sets
	// Retry-After and the access log's fields.
	env      *dispatch.Envelope
	replayed bool
	applied  string // Preference-Applied
}

// envelopeReply is the one place an envelope becomes a reply's body: a
// failure is redacted here (dispatch.Redact), whoever built it, so nothing
// the caller sent comes back unsanitized in a refusal.
func (s *Server) envelopeReply(env *dispatch.Envelope, status int) *reply {
	s.opts.Dispatcher.Redact(env)
	return &reply{status: status, env: env, body: env.AppendJSON(make([]byte, 0, 512+len(env.Data)))}
}

// send writes a reply.
func (s *Server) send(w http.ResponseWriter, r *http.Request, rp *reply) {
	ri := info(r)
	h := w.Header()
	if env := rp.env; env != nil {
		ri.outcome = string(env.Status)
		if env.Error != nil {
			ri.errType = string(env.Error.Type)
			if ms := env.Error.RetryAfterMS; ms > 0 && (rp.status == http.StatusTooManyRequests || rp.status == http.StatusServiceUnavailable ||
				rp.status == http.StatusConflict || rp.status == http.StatusInsufficientStorage) {
				h.Set("Retry-After", retryAfterSeconds(time.Duration(ms)*time.Millisecond))
			}
		}
	}
	if c := s.challengeFor(r, rp.status); c != "" {
		// RFC 9110 §11.6.1, and MCP's authorization rules: a 401 names
		// the scheme the client must use (and, with token issuers, where
		// to get a token); a token lacking a scope is told which.
		h.Set("WWW-Authenticate", c)
	}
	if rp.status == StatusClientClosed {
		ri.status = rp.status
		return // nobody is listening
	}
	if rp.location != "" {
		h.Set("Location", rp.location)
	}
	if rp.applied != "" {
		h.Set("Preference-Applied", rp.applied)
	}
	if rp.replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	h.Set("Content-Type", "application/json")
	if ri.bodyFailed || !ri.bodyRead && reqbody.Unread(r) {
		// The connection cannot carry another request: answer and close
		// it without holding this goroutine through the close.
		if s.bodies.HangUp(w, rp.status, append(rp.body, '\n')) {
			ri.status = rp.status
			return
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(rp.body)+1))
	w.WriteHeader(rp.status)
	_, _ = w.Write(append(rp.body, '\n'))
}

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// Without HTML escaping, as the envelope is written (strictjson): a
	// raw audit record goes out byte for byte as it was sealed, < > & kept
	// (json.Marshal would escape them inside a RawMessage too, and the
	// line would no longer be the one its hash covers).
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		body.Reset()
		body.WriteString(`{"status":"error","success":false,"error":{"type":"system_error","message":"encoding the response failed","retryable":false}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(body.Bytes())
}
