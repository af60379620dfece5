package server

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/registry"
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
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.opts.OpenAPI)
}

// visible returns the tools the caller may use: a key sees only its tools.
func (s *Server) visible(r *http.Request) []*registry.Entry {
	p := principal(r)
	var out []*registry.Entry
	for _, e := range s.opts.Dispatcher.Registry().Entries() {
		if p.Allows(e.Spec.Name) {
			out = append(out, e)
		}
	}
	return out
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	f, err := registry.ParseFormat(r.URL.Query().Get("format"))
	if err != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "%v", err).WithCode("unknown_format"))
		return
	}
	body, err := registry.Render(f, s.visible(r))
	if err != nil {
		s.refuse(w, r, "", dispatch.StatusError, tools.Errorf(tools.SystemError, "rendering the listing failed").Wrap(err))
		return
	}
	w.Header().Set("Content-Type", f.ContentType())
	_, _ = w.Write(body)
}

// entry resolves {name} for the caller; a tool the caller may not use is
// reported as absent, so a key cannot probe what other keys may call.
func (s *Server) entry(w http.ResponseWriter, r *http.Request) (*registry.Entry, bool) {
	name := chi.URLParam(r, "name")
	info(r).tool = name
	e, ok := s.opts.Dispatcher.Registry().Lookup(name)
	if !ok || !principal(r).Allows(name) {
		s.refuse(w, r, name, dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "there is no tool named %q", name).
			WithSuggestion("GET /tools lists every tool"))
		return nil, false
	}
	return e, true
}

func (s *Server) getTool(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.entry(w, r); ok {
		writeJSON(w, http.StatusOK, e.Item())
	}
}

// getSchema serves the parameters schema byte for byte as the registry
// compiled it: what a model is shown is what validation uses.
func (s *Server) getSchema(w http.ResponseWriter, r *http.Request) {
	if e, ok := s.entry(w, r); ok {
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write(e.Spec.Parameters)
	}
}

func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	info(r).tool = name
	s.withBody(w, r, name, func(body []byte) { s.executeBody(w, r, name, body) })
}

func (s *Server) executeBody(w http.ResponseWriter, r *http.Request, name string, body []byte) {
	ri := info(r)
	req, terr := s.pipelineRequest(r, name, body)
	if terr != nil {
		s.refuse(w, r, name, dispatch.StatusRejected, terr)
		return
	}
	if wantsExecutions(r) {
		o, terr := s.callOptions(r)
		if terr != nil {
			s.refuse(w, r, name, dispatch.StatusRejected, terr)
			return
		}
		s.executeWith(w, r, req, o)
		return
	}
	if !wantsStream(r) {
		s.send(w, r, s.runSync(r, req))
		return
	}
	stream := newEventStream(w)
	req.OnStart = func() { stream.open(ri.id, name) }
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

// readBody enforces the transport rules: a JSON content type (charset, if
// given, UTF-8) and the body cap. An empty body means "no arguments".
func (s *Server) readBody(r *http.Request) ([]byte, *tools.Error) {
	if r.ContentLength == 0 {
		return nil, nil
	}
	ct := r.Header.Get("Content-Type")
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
		return nil, tools.Errorf(tools.ValidationError, "the body must be JSON, sent as Content-Type: application/json (got %q)", ct).
			WithCode("unsupported_media_type").WithSuggestion("add the header \"Content-Type: application/json\"")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, tools.Errorf(tools.ValidationError, "the body is larger than the %d-byte limit", s.opts.MaxBodyBytes).
			WithCode("body_too_large").WithSuggestion("send smaller arguments; large content belongs in files the tool reads")
	}
	if err != nil {
		return nil, tools.Errorf(tools.ValidationError, "reading the body failed: %v", err).WithCode("body_unreadable")
	}
	return body, nil
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
	s.send(w, r, envelopeReply(env, httpStatus(env)))
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

func envelopeReply(env *dispatch.Envelope, status int) *reply {
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
	if rp.status == http.StatusUnauthorized {
		// RFC 9110 §11.6.1, and MCP's authorization rules: a 401 names
		// the scheme the client must use.
		h.Set("WWW-Authenticate", wwwAuthenticate)
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
	h.Set("Content-Length", strconv.Itoa(len(rp.body)+1))
	w.WriteHeader(rp.status)
	_, _ = w.Write(append(rp.body, '\n'))
}

// retryAfterSeconds is a Retry-After value: whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"status":"error","success":false,"error":{"type":"system_error","message":"encoding the response failed","retryable":false}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
