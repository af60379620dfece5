package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// The execution routes translate HTTP into internal/executions and back;
// the decisions (accept, replay, refuse, cancel) are the service's, the
// statuses the table's.

// wantsExecutions reports whether a call to execute asks for more than a
// plain synchronous call: async, an idempotency key, or a turn.
func wantsExecutions(r *http.Request) bool {
	h := r.Header
	return len(h["Prefer"]) > 0 || len(h["Idempotency-Key"]) > 0 || len(h["Toold-Turn"]) > 0
}

// callOptions are the execution headers of a request, parsed.
type callOptions struct {
	pref preference
	key  string
	turn string
}

func (s *Server) callOptions(r *http.Request) (callOptions, *tools.Error) {
	var o callOptions
	var terr *tools.Error
	if o.pref, terr = parsePrefer(r.Header.Values("Prefer"), s.opts.Executions.MaxWait()); terr != nil {
		return o, terr
	}
	if o.key, terr = parseIdempotencyKey(r); terr != nil {
		return o, terr
	}
	o.turn, terr = parseTurn(r)
	return o, terr
}

// executeWith serves an execute (or POST /executions) call with its
// execution headers: async or not, under an idempotency key and a turn.
func (s *Server) executeWith(w http.ResponseWriter, r *http.Request, req *dispatch.Request, o callOptions) {
	mode := "sync"
	if o.pref.async {
		mode = "async"
	}
	reg := s.opts.Dispatcher.Registry()
	readOnly, rerunnable := false, executions.MayRunAgain(reg, req.Tool)
	if e, ok := reg.Lookup(req.Tool); ok {
		readOnly = e.Spec.Effects.ReadOnly
	}
	do := func() *reply {
		if o.pref.async {
			return s.submitReply(r, req, o.pref)
		}
		return s.runSync(r, req)
	}
	s.send(w, r, s.once(r, o, mode, req, s.lease(req.Tool), readOnly, rerunnable, do))
}

// lease is how long an idempotency or turn claim is held for a request
// that runs these tools: the longest timeout among them, and 10 s more.
func (s *Server) lease(toolNames ...string) time.Duration {
	var longest time.Duration
	for _, name := range toolNames {
		if e, ok := s.opts.Dispatcher.Registry().Lookup(name); ok {
			longest = max(longest, e.Spec.Limits.Timeout)
		}
	}
	return 10*time.Second + longest
}

// once applies the idempotency key and then the turn around do. A key
// whose earlier request was lost with its replica does not run again
// unless its tools may (rerunnable: executions.MayRunAgain, the rule the
// worker follows too): it is answered that the outcome is unknown, and
// that answer is kept for the key.
func (s *Server) once(r *http.Request, o callOptions, mode string, req *dispatch.Request, lease time.Duration, readOnly, rerunnable bool, do func() *reply) *reply {
	ctx, ex := r.Context(), s.opts.Executions
	ri := info(r)
	var claims []*executions.Claim
	if o.key != "" {
		claim, ans, err := ex.Begin(ctx, executions.IdempotencyScope(req.Caller), o.key, executions.Fingerprint(mode, req.Tool, req.Body), ri.id, lease)
		if err != nil {
			return s.errorReply(r, req.Tool, err)
		}
		if ans != nil {
			return &reply{status: ans.Status, body: ans.Body, location: ans.Location, replayed: true}
		}
		claims = append(claims, claim)
	}
	rp := (*reply)(nil)
	if len(claims) > 0 && claims[0].Lost != "" && !rerunnable {
		env := dispatch.Failure(ri.id, req.Tool, dispatch.StatusInterrupted, executions.Interrupted(claims[0].Lost))
		rp = s.envelopeReply(env, httpStatus(env))
	}
	if o.turn != "" && rp == nil {
		claim, ans, err := ex.BeginTurn(ctx, req.Caller, o.turn, req.Tool, req.Body, readOnly, ri.id, lease)
		switch {
		case err != nil:
			rp = s.errorReply(r, req.Tool, err)
		case ans != nil:
			rp = redundant(ans)
		default:
			claims = append(claims, claim)
		}
	}
	if rp == nil {
		rp = do()
	}
	for _, c := range claims {
		if nothingRan(rp) {
			ex.Abandon(ctx, c) // a retry must really run
			continue
		}
		if err := ex.Finish(ctx, c, &executions.Answer{Status: rp.status, Location: rp.location, Body: rp.body}); err != nil {
			s.log.Warn("idempotency: the answer could not be stored; a retry will run again")
		}
	}
	return rp
}

// nothingRan: the request was refused before any tool ran (a validation,
// confirmation, permission or overload refusal, an unknown tool), or the
// store or the caller went away. Such an answer is not kept for the key or
// the turn: a retry, such as the same call with its Toold-Confirm token,
// must run rather than be told the refusal again.
func nothingRan(rp *reply) bool {
	switch rp.status {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInsufficientStorage, StatusClientClosed:
		return true
	}
	return rp.env != nil && (rp.env.Status == dispatch.StatusRejected || rp.env.Status == dispatch.StatusNotFound)
}

// redundant is the answer of an earlier identical call in the same turn,
// marked so the caller (and its model) see it is not a new result.
func redundant(ans *executions.Answer) *reply {
	var env dispatch.Envelope
	if err := json.Unmarshal(ans.Body, &env); err != nil {
		return &reply{status: ans.Status, body: ans.Body, location: ans.Location}
	}
	env.Redundant = true
	return &reply{status: ans.Status, body: env.AppendJSON(nil), location: ans.Location, env: &env}
}

// errorReply answers a service error with an envelope.
func (s *Server) errorReply(r *http.Request, tool string, err error) *reply {
	te, ok := tools.AsError(err)
	if !ok {
		te = tools.Errorf(tools.SystemError, "internal error; the operator can find it in the logs under request id %s", info(r).id).Wrap(err)
		s.log.Error("executions: unexpected error", zap.Error(err))
	}
	status := dispatch.StatusRejected
	if te.Kind == tools.NotFound {
		status = dispatch.StatusNotFound
	}
	env := dispatch.Failure(info(r).id, tool, status, te)
	return s.envelopeReply(env, httpStatus(env))
}

// submitReply accepts an async call and answers 202 with its location, or
// 200 when Prefer: wait saw it end; a refusal is answered as a sync call
// would be.
func (s *Server) submitReply(r *http.Request, req *dispatch.Request, pref preference) *reply {
	rec, refusal, err := s.opts.Executions.Submit(r.Context(), executions.Call{Tool: req.Tool, Body: req.Body, RequestID: req.RequestID,
		Caller: req.Caller, Principal: req.Principal, Allowed: req.Allowed, Timeout: req.Timeout, ConfirmToken: req.ConfirmToken,
		Wait: pref.wait})
	switch {
	case err != nil:
		return s.errorReply(r, req.Tool, err)
	case refusal != nil:
		return s.envelopeReply(refusal, httpStatus(refusal))
	}
	return s.recordReply(r, rec, pref.wait, opSubmit)
}

// recordReply answers with an execution's envelope, after waiting up to
// wait for it to end.
func (s *Server) recordReply(r *http.Request, rec *executions.Record, wait time.Duration, op int) *reply {
	if wait > 0 && !rec.Status.Final() {
		if waited, err := s.opts.Executions.Wait(r.Context(), rec.Caller, rec.ID, wait); err == nil {
			rec = waited
		}
	}
	env := rec.View()
	rp := s.envelopeReply(env, executionStatus(env, op, wait))
	rp.location = rec.Location()
	if op == opSubmit {
		rp.applied = "respond-async"
		if wait > 0 {
			rp.applied += ", wait=" + strconv.Itoa(int(wait.Seconds()))
		}
	}
	return rp
}

// withBody admits a request that starts work (none while draining) and
// reads its body, then calls h; the work is counted until h returns. A
// refusal names tool, when the route names one. Such a route names no
// tool before its body is read, so nothing but the shared byte budget and
// the body timeout is held while it arrives; the calls it carries are
// admitted to their bulkheads when they run.
func (s *Server) withBody(w http.ResponseWriter, r *http.Request, tool string, h func(body []byte)) {
	if !s.admit() {
		s.refuse(w, r, tool, dispatch.StatusRejected, drainingError())
		return
	}
	defer s.done()
	if terr := contentType(r); terr != nil {
		s.refuse(w, r, tool, dispatch.StatusRejected, terr)
		return
	}
	s.readThen(w, r, tool, time.Time{}, h)
}

// submitExecution is POST /executions: {tool, arguments}, always async.
func (s *Server) submitExecution(w http.ResponseWriter, r *http.Request) {
	s.withBody(w, r, "", func(body []byte) { s.submitBody(w, r, body) })
}

func (s *Server) submitBody(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if terr := decodeStrict(body, s.opts.Dispatcher.MaxDepth(), &in); terr != nil || in.Tool == "" {
		if terr == nil {
			terr = tools.Errorf(tools.ValidationError, "the body names no tool").WithCode(tools.CodeInvalidJSON)
		}
		terr.WithSuggestion(`send {"tool": "read_file", "arguments": {"paths": ["go.mod"]}}`)
		s.refuse(w, r, in.Tool, dispatch.StatusRejected, terr)
		return
	}
	info(r).tool = in.Tool
	o, terr := s.callOptions(r)
	var req *dispatch.Request
	if terr == nil {
		o.pref.async = true
		req, terr = s.pipelineRequest(r, in.Tool, in.Arguments)
	}
	if terr != nil {
		s.refuse(w, r, in.Tool, dispatch.StatusRejected, terr)
		return
	}
	s.executeWith(w, r, req, o)
}

// pipelineRequest is the dispatch request of a call made over HTTP: the
// caller, its key's tools, its Toold-Timeout and Toold-Confirm headers.
func (s *Server) pipelineRequest(r *http.Request, tool string, body []byte) (*dispatch.Request, *tools.Error) {
	timeout, terr := requestedTimeout(r)
	if terr != nil {
		return nil, terr
	}
	p, err := principal(r)
	if err != nil {
		s.log.Error("a call was made without an authenticated caller", zap.String("route", routeOf(r)), zap.Error(err))
		return nil, tools.Errorf(tools.SystemError, "internal error; the operator can find it in the logs under request id %s", info(r).id)
	}
	tool = s.opts.Dispatcher.Registry().Canonical(tool)
	req := dispatch.NewRequest(tool, body, info(r).id, dispatch.FromPrincipal(p))
	req.Unwrap, req.Timeout, req.ConfirmToken = true, timeout, r.Header.Get("Toold-Confirm")
	req.Lineage = s.opts.Executions.LineageFor(p.Name)
	req.Via = via(r)
	return req, nil
}

// runSync runs a call now; one that pauses or waits for an approval is
// parked and answered 202.
func (s *Server) runSync(r *http.Request, req *dispatch.Request) *reply {
	env := s.opts.Dispatcher.Execute(r.Context(), req)
	if env.Status == dispatch.StatusWaiting {
		return s.parked(r, req, env)
	}
	return s.envelopeReply(env, httpStatus(env))
}

// decodeStrict decodes a small JSON request object into v
// (strictjson.DecodeInto). The value it carries (arguments, an answer) sits
// one level in and may nest valueDepth deep, as a call's arguments may.
func decodeStrict(body []byte, valueDepth int, v any) *tools.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		return tools.Errorf(tools.ValidationError, "the body is empty").WithCode(tools.CodeInvalidJSON)
	}
	err := strictjson.DecodeInto(body, valueDepth+1, v)
	if _, notJSON := errors.AsType[*strictjson.Error](err); notJSON {
		return tools.Errorf(tools.ValidationError, "the body is not acceptable JSON: %v", err).WithCode(tools.CodeInvalidJSON)
	}
	if err != nil {
		return tools.Errorf(tools.ValidationError, "the body does not have the expected shape: %v", err).WithCode(tools.CodeInvalidJSON)
	}
	return nil
}

func drainingError() *tools.Error {
	e := tools.Errorf(tools.OverloadError, "toold is shutting down and accepts no new calls").WithCode(tools.CodeDraining).
		WithSuggestion("retry against another replica, or after toold restarts")
	e.RetryAfter = time.Second
	return e
}

// pathID is the {id} of an execution or approval route. toold's ids are
// 24 hex digits (executions.ValidID); anything else names nothing and is
// answered as unknown (absent with no), without being looked up or
// repeated back in the answer or the audit log.
func (s *Server) pathID(w http.ResponseWriter, r *http.Request, absent func() *tools.Error) (string, bool) {
	id := chi.URLParam(r, "id")
	if executions.ValidID(id) {
		return id, true
	}
	s.refuse(w, r, "", dispatch.StatusNotFound, absent())
	return "", false
}

func noExecution() *tools.Error {
	return tools.Errorf(tools.NotFound, "there is no execution with that id for this API key").WithCode(tools.CodeNoExecution).
		WithSuggestion("an execution's id is the 24 hex digits its Location ends with; GET /executions lists this key's executions")
}

func noApproval() *tools.Error {
	return tools.Errorf(tools.NotFound, "no call waits for approval under that id").WithCode(tools.CodeNoApproval).
		WithSuggestion("an approval's id is the 24 hex digits of its execution's id; GET /approvals lists the calls waiting")
}

// getExecution is GET /executions/{id}[?wait=30s].
func (s *Server) getExecution(w http.ResponseWriter, r *http.Request) {
	wait, terr := parseWait(r.URL.Query().Get("wait"), s.opts.Executions.MaxWait())
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	id, ok := s.pathID(w, r, noExecution)
	if !ok {
		return
	}
	// One wait from the start: it reads the record once it listens for the
	// end (a read before it would be a second read, ~30µs, of a call not
	// ended yet), and rides out a store away for a moment within wait.
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	rec, err := s.opts.Executions.Wait(r.Context(), p.Name, id, wait)
	if err != nil {
		s.send(w, r, s.errorReply(r, "", err))
		return
	}
	info(r).tool = rec.Tool
	s.send(w, r, s.recordReply(r, rec, 0, opRead))
}

// cancelExecution is DELETE /executions/{id}.
func (s *Server) cancelExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r, noExecution)
	if !ok {
		return
	}
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	rec, err := s.opts.Executions.Cancel(r.Context(), p.Name, id)
	if err != nil {
		s.send(w, r, s.errorReply(r, "", err))
		return
	}
	s.auditAction(r, "cancel_execution", id)
	info(r).tool = rec.Tool
	s.send(w, r, s.recordReply(r, rec, 0, opCancel))
}

// listExecutions is GET /executions[?tool=&status=&cursor=&limit=].
func (s *Server) listExecutions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, terr := parseLimit(q.Get("limit"))
	// Records hold the canonical name; a function name finds them too.
	f := executions.Filter{Tool: s.opts.Dispatcher.Registry().Canonical(q.Get("tool")), Status: dispatch.Status(q.Get("status"))}
	cursor := q.Get("cursor")
	switch {
	case terr != nil:
	case cursor != "" && !executions.ValidID(cursor):
		terr = badParam("cursor", "is not a cursor this listing returned", "pass the next value of the previous page, or leave it out")
	case f.Status != "" && !slices.Contains(dispatch.ExecutionStatuses, f.Status):
		terr = badParam("status", "is not an execution status", "use one of "+statusList())
	case f.Tool != "" && !tools.NamePattern.MatchString(f.Tool):
		terr = badParam("tool", "is not a tool name", "use a name GET /tools lists")
	}
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	page, err := s.opts.Executions.List(r.Context(), p.Name, f, cursor, limit)
	if err != nil {
		s.send(w, r, s.errorReply(r, "", err))
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// statusList names every execution status, for a suggestion.
func statusList() string {
	names := make([]string, len(dispatch.ExecutionStatuses))
	for i, st := range dispatch.ExecutionStatuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// batch is POST /batch: the calls run now (one document of every envelope
// and the counts), or, with Prefer: respond-async, as one execution.
func (s *Server) batch(w http.ResponseWriter, r *http.Request) {
	s.withBody(w, r, "", func(body []byte) { s.batchBody(w, r, body) })
}

func (s *Server) batchBody(w http.ResponseWriter, r *http.Request, body []byte) {
	o, terr := s.callOptions(r)
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	b, terr := executions.ParseBatch(body, s.opts.Executions.BatchMax(), s.opts.Dispatcher.MaxDepth())
	if terr == nil {
		terr = s.checkCallIDs(b)
	}
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	reg := s.opts.Dispatcher.Registry()
	for i := range b.Calls {
		b.Calls[i].Tool = reg.Canonical(b.Calls[i].Tool)
	}
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	mode := "batch"
	if o.pref.async {
		mode = "batch-async"
	}
	req := dispatch.NewRequest("", body, info(r).id, dispatch.FromPrincipal(p))
	o.turn = "" // a turn's redundancy check is per call, not per batch
	names := make([]string, len(b.Calls))
	for i, c := range b.Calls {
		names[i] = c.Tool
	}
	s.send(w, r, s.once(r, o, mode, req, s.lease(names...), false, executions.MayRunAgain(reg, names...), func() *reply {
		if !o.pref.async {
			res := s.opts.Executions.Batch(auth.WithIdentity(r.Context(), p.Who()), b, p.Name, info(r).id, p.Allows)
			data, _ := json.Marshal(res)
			return &reply{status: http.StatusOK, body: data}
		}
		rec, refusal, err := s.opts.Executions.SubmitBatch(auth.WithIdentity(r.Context(), p.Who()), b, p.Name, info(r).id, p.Allows)
		switch {
		case err != nil:
			return s.errorReply(r, "", err)
		case refusal != nil:
			return s.envelopeReply(refusal, httpStatus(refusal))
		}
		return s.recordReply(r, rec, o.pref.wait, opSubmit)
	}))
}

// checkCallIDs holds a batch's call ids to the rule of request ids: each
// is repeated in the answer and becomes part of its call's request id.
func (s *Server) checkCallIDs(b *executions.BatchRequest) *tools.Error {
	var fields []tools.FieldError
	for i, c := range b.Calls {
		if !s.acceptableID(c.ID) {
			fields = append(fields, tools.FieldError{Pointer: "/calls/" + strconv.Itoa(i) + "/id",
				Message: "must be 1-64 letters, digits and . _ : - (and hold no secret)"})
		}
	}
	if fields == nil {
		return nil
	}
	e := tools.Errorf(tools.ValidationError, "the batch has %d call id(s) toold cannot use", len(fields)).WithCode(tools.CodeInvalidBatch).
		WithSuggestion("name the calls with short ids such as a, b or read-1")
	e.Fields = fields
	return e
}

// sseContext ends a stream when the client leaves or toold drains, so a
// long-lived stream never holds a shutdown up.
func (s *Server) sseContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
