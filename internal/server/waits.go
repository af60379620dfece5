package server

import (
	"cmp"
	"encoding/json"
	"net/http"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// A call whose tool pauses (a subtask, an input) or that waits for a
// person's approval is answered 202 with its execution's location: it goes
// on without the caller, who resumes it (or an approver decides on it).

// parked answers a synchronous call that paused: it becomes a waiting
// execution, answered 202 with where to follow and resume it.
func (s *Server) parked(r *http.Request, req *dispatch.Request, env *dispatch.Envelope) *reply {
	rec, err := s.opts.Executions.Park(r.Context(), req, env)
	if err != nil {
		return s.errorReply(r, req.Tool, err)
	}
	rp := s.envelopeReply(env, http.StatusAccepted)
	rp.location = rec.Location()
	return rp
}

// streamParked goes on with a streamed call that paused: the waiting
// event, then the execution's events as it is resumed, to its end.
func (s *Server) streamParked(r *http.Request, stream *eventStream, req *dispatch.Request, env *dispatch.Envelope) {
	rec, err := s.opts.Executions.Park(r.Context(), req, env)
	if err != nil {
		stream.finish(s.errorReply(r, req.Tool, err).env)
		return
	}
	ctx, cancel := s.sseContext(r)
	defer cancel()
	defer stream.out.keepAlive()()
	s.follow(ctx, r, stream, rec.Caller, rec.ID, events.Position{FromStart: true}, cancel)
}

// resumeExecution is POST /executions/{id}/resume: {"answer": ...} for an
// input, {"result": ...} for a subtask. The next step runs on any replica;
// Prefer: wait=N waits for it to end or pause again.
func (s *Server) resumeExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r, noExecution)
	if !ok {
		return
	}
	s.withBody(w, r, "", func(body []byte) {
		kind, value, terr := parseResume(body, s.opts.Dispatcher.MaxDepth())
		var pref preference
		if terr == nil {
			pref, terr = parsePrefer(r.Header.Values("Prefer"), s.opts.Executions.MaxWait())
		}
		if terr != nil {
			s.auditAction(r, "resume_refused", "execution "+id+": "+cmp.Or(string(terr.Code), terr.Message))
			s.refuse(w, r, "", dispatch.StatusRejected, terr)
			return
		}
		p, ok := s.caller(w, r)
		if !ok {
			return
		}
		rec, err := s.opts.Executions.Resume(r.Context(), p.Name, id, kind, value)
		if err != nil {
			s.auditAction(r, "resume_refused", "execution "+id+": "+refusalOf(err))
			s.send(w, r, s.errorReply(r, "", err))
			return
		}
		s.auditAction(r, "resume", "execution "+id+": "+rec.Tool+" ("+kind+")")
		info(r).tool = rec.Tool
		s.send(w, r, s.recordReply(r, rec, pref.wait, opSubmit))
	})
}

// listedApproval is a waiting call as GET /approvals lists it: with
// whether the approver asking may decide on it, and if not, why and what
// to set — what POST /approvals/{id} would answer — so a client (the
// console) says so before anyone tries.
type listedApproval struct {
	executions.PendingApproval
	MayDecide bool             `json:"may_decide"`
	Refusal   *approvalRefusal `json:"refusal,omitempty"`
}

type approvalRefusal struct {
	Code       tools.Code `json:"code"`
	Message    string     `json:"message"`
	Suggestion string     `json:"suggestion"`
}

// listApprovals is GET /approvals: the calls waiting for a person's
// approval, oldest first, with their arguments as the approver reviews
// them, and whether the approver may decide on each. Without keys and
// with approvals.self_approval on, a notice says that any local process
// may decide.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	list, err := s.opts.Executions.Approvals(r.Context())
	if err != nil {
		s.send(w, r, s.errorReply(r, "", err))
		return
	}
	a := s.decider(p, r)
	out := make([]listedApproval, len(list))
	for i, pa := range list {
		out[i] = listedApproval{PendingApproval: pa, MayDecide: true}
		if te := executions.MayDecide(a, pa.Caller); te != nil {
			out[i].MayDecide, out[i].Refusal = false, &approvalRefusal{Code: te.Code, Message: te.Message, Suggestion: te.Suggestion}
		}
	}
	body := map[string]any{"approvals": out}
	if a.Anonymous && a.SelfApproval {
		body["notice"] = "toold has no API keys and approvals.self_approval is on: any process that reaches toold locally " +
			"— a command tool with the network, a consultation CLI — may approve as you do"
	}
	writeJSON(w, http.StatusOK, body)
}

// decider is r's caller as an approver: who, and what the rule of
// executions.MayDecide needs to know of them.
func (s *Server) decider(p *auth.Principal, r *http.Request) executions.Decision {
	return executions.Decision{By: p.Name, Approver: p.Who(), Anonymous: p.Kind == auth.KindAnonymous, SelfApproval: s.opts.SelfApproval,
		Gate: func(tool string, args json.RawMessage) *tools.Error {
			return s.opts.Dispatcher.MayApprove(p.Who(), via(r), tool, args)
		}}
}

// decideApproval is POST /approvals/{id}: {"approve": true|false,
// "reason": "..."} from a key with the approve role.
func (s *Server) decideApproval(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r, noApproval)
	if !ok {
		return
	}
	s.withBody(w, r, "", func(body []byte) {
		approve, reason, terr := parseDecision(body)
		if terr != nil {
			s.auditAction(r, "decision_refused", "execution "+id+": "+cmp.Or(string(terr.Code), terr.Message))
			s.refuse(w, r, "", dispatch.StatusRejected, terr)
			return
		}
		// An accepted decision is audited where it is made, with its reason.
		p, ok := s.caller(w, r)
		if !ok {
			return
		}
		d := s.decider(p, r)
		d.Approve, d.Reason, d.RequestID = approve, reason, info(r).id
		rec, err := s.opts.Executions.Decide(r.Context(), id, d)
		if err != nil {
			s.auditAction(r, "decision_refused", "execution "+id+": "+refusalOf(err))
			s.send(w, r, s.errorReply(r, "", err))
			return
		}
		info(r).tool = rec.Tool
		rp := s.envelopeReply(rec.View(), http.StatusOK)
		rp.location = rec.Location()
		s.send(w, r, rp)
	})
}

// parseResume reads a resumption's body: {"answer": ...} for an input,
// {"result": ...} for a subtask, and nothing else; the value may nest
// valueDepth deep.
func parseResume(body []byte, valueDepth int) (kind string, value json.RawMessage, terr *tools.Error) {
	var in struct {
		Answer json.RawMessage `json:"answer"`
		Result json.RawMessage `json:"result"`
	}
	terr = decodeStrict(body, valueDepth, &in)
	kind, value = tools.WaitInput, in.Answer
	switch {
	case terr != nil:
	case in.Answer != nil && in.Result != nil:
		terr = tools.Errorf(tools.ValidationError, "the body holds both an answer and a result").WithCode(tools.CodeInvalidJSON)
	case in.Result != nil:
		kind, value = tools.WaitSubtask, in.Result
	case in.Answer == nil:
		terr = tools.Errorf(tools.ValidationError, "the body holds neither an answer nor a result").WithCode(tools.CodeInvalidJSON)
	}
	if terr != nil {
		return "", nil, terr.WithSuggestion(`send {"answer": ...} to an input request, {"result": ...} to a subtask`)
	}
	return kind, value, nil
}

// maxReason bounds an approver's reason, which is kept in the record, the
// audit log and the caller's error.
const maxReason = 2000

// parseDecision reads an approver's body: {"approve": true|false,
// "reason": "..."}; approve is required.
func parseDecision(body []byte) (approve bool, reason string, terr *tools.Error) {
	var in struct {
		Approve *bool  `json:"approve"`
		Reason  string `json:"reason"`
	}
	terr = decodeStrict(body, strictjson.DefaultMaxDepth, &in)
	switch {
	case terr != nil:
	case in.Approve == nil:
		terr = tools.Errorf(tools.ValidationError, "the body does not say whether to approve").WithCode(tools.CodeInvalidJSON)
	case len(in.Reason) > maxReason:
		terr = tools.Errorf(tools.ValidationError, "the reason is longer than %d bytes", maxReason).WithCode(tools.CodeInvalidJSON)
	}
	if terr != nil {
		return false, "", terr.WithSuggestion(`send {"approve": true, "reason": "..."} or {"approve": false, "reason": "..."}`)
	}
	return *in.Approve, in.Reason, nil
}

// auditAction records an action of the caller on r in the audit log, when there
// is one.
func (s *Server) auditAction(r *http.Request, action, target string) {
	if s.opts.Recorder != nil {
		p, err := principal(r)
		if err != nil { // a wiring bug: said in the log, and the request is refused by its handler
			s.log.Error("an action to audit has no authenticated caller", zap.String("action", action), zap.Error(err))
			return
		}
		s.opts.Recorder.AdminBy(p.Who(), p.Name, action, target, info(r).id)
	}
}

// refusalOf is how an audit record names why something was refused: the
// error's code, else its kind.
func refusalOf(err error) string {
	if te, ok := tools.AsError(err); ok {
		return cmp.Or(string(te.Code), string(te.Kind))
	}
	return "system_error"
}
