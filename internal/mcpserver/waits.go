package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/tools"
)

// A call whose tool pauses becomes a waiting execution, kept by the
// executions service as for REST. A 2026-07-28 client that can answer is
// asked through MCP's own input_required result (multi-round-trip
// requests): an input as an elicitation to its user, a subtask as a
// sampling request to its model; the request state names the execution, and
// the client's retry resumes it. An older client that declared it can
// answer (elicitation, sampling) is asked by toold's own requests, over
// stdio or on the call's HTTP response turned into an event stream
// (follow.go), and the call answers with the tool's result. Any other
// client, and any call waiting for an approver, gets a result that says
// what the call waits for and what finishes it; a call that waits for an
// approval is joined by its repeat. A client that declared tasks can call
// such tools as tasks instead (tasks.go).

// Request-state prefixes of toold's multi-round-trip results.
const (
	stateConfirm = "confirm:"
	stateExec    = "exec:"
)

// Input request ids.
const (
	inputAnswer  = "input"
	inputSubtask = "subtask"
)

// MetaWaiting carries a waiting call's execution, what it waits for, and
// where to resume it.
const MetaWaiting = "toold/waiting"

// resumeWait is how long a retry that resumed an execution waits for its
// next step before it answers with where to follow it.
const resumeWait = 60 * time.Second

// waited renders a call that paused: parked as an execution, then asked
// through the client or described.
func (s *Server) waited(ctx context.Context, req *mcp.CallToolRequest, dreq *dispatch.Request, env *dispatch.Envelope) (*mcp.CallToolResult, error) {
	if s.opts.Executions == nil {
		return nil, fmt.Errorf("mcpserver: a call waits and no executions service keeps waits")
	}
	ex := s.opts.Executions
	rec, joined, err := ex.ParkOrJoin(ctx, dreq, env)
	if err != nil {
		te, ok := tools.AsError(err)
		if !ok {
			te = tools.Errorf(tools.OverloadError, "the waiting call could not be kept: %v", err).WithCode(tools.CodeStoreUnavailable)
		}
		return waitRefused(env, te), nil
	}
	if joined && (rec.Status == dispatch.StatusPending || rec.Status == dispatch.StatusRunning) {
		// Approved meanwhile, and running: the repeat waits for its end.
		if r, err := ex.WaitFinal(ctx, rec.Caller, rec.ID, resumeWait); err == nil {
			rec = r
		}
	}
	if p := peerOf(ctx); rec.Wait != nil && p.canAsk(rec.Wait.For) {
		// An older client that can answer: ask it, and answer with what
		// the execution came to (or, ended early, where it stands).
		rec, _ = s.follow(ctx, p, rec, false, nil)
	}
	if res := s.asTaskV2(req, rec); res != nil {
		return res, nil
	}
	return s.outcome(req, rec), nil
}

// askOrDescribe asks the client for what rec waits for, when it can
// answer; otherwise it says what the call waits for.
func (s *Server) askOrDescribe(req *mcp.CallToolRequest, rec *executions.Record) *mcp.CallToolResult {
	env := rec.View()
	if ir := s.inputRequest(req, env.Waiting); ir != nil {
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{ir.id: ir.req}, RequestState: stateExec + rec.ID}
	}
	return describeWait(env)
}

type inputReq struct {
	id  string
	req mcp.InputRequest
}

// inputRequest is what a 2026-07-28 client is asked: an elicitation for an
// input, a sampling request for a subtask; nil where the client cannot
// answer it (an older protocol, no such capability, an approval).
func (s *Server) inputRequest(req *mcp.CallToolRequest, w *dispatch.Waiting) *inputReq {
	caps := roundTrips(req)
	if caps == nil || w == nil {
		return nil
	}
	switch w.For {
	case tools.WaitInput:
		if caps.Elicitation == nil {
			return nil
		}
	case tools.WaitSubtask:
		if caps.Sampling == nil {
			return nil
		}
	}
	return question(w)
}

// question is what a wait asks a client, whatever the way it is asked (an
// input request of a multi-round-trip result, a request of toold's own):
// an elicitation for an input, a sampling request for a subtask; nil for a
// wait no client can answer (an approval) or one that cannot be read.
func question(w *dispatch.Waiting) *inputReq {
	switch w.For {
	case tools.WaitInput:
		var in tools.InputRequest
		if json.Unmarshal(w.Request, &in) != nil {
			return nil
		}
		schema, _ := elicitSchema(in)
		return &inputReq{inputAnswer, &mcp.ElicitParams{Mode: "form", Message: in.Prompt, RequestedSchema: schema}}
	case tools.WaitSubtask:
		var st tools.SubtaskRequest
		if json.Unmarshal(w.Request, &st) != nil {
			return nil
		}
		return &inputReq{inputSubtask, &mcp.CreateMessageParams{MaxTokens: 4096,
			SystemPrompt: "Perform the subtask described and answer with its result only.",
			Messages:     []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: subtaskText(st)}}}}}
	}
	return nil
}

// method is the JSON-RPC method that asks the question on its own.
func (ir *inputReq) method() string {
	if ir.id == inputSubtask {
		return "sampling/createMessage"
	}
	return "elicitation/create"
}

// elicitSchema is the form an input's answer is asked in. MCP's forms are
// flat objects of primitive fields: an input whose schema is one is asked
// as it is (the answer is the form's content); any other answer is the
// form's one field "answer" (wrapped is true).
func elicitSchema(in tools.InputRequest) (schema json.RawMessage, wrapped bool) {
	if len(in.Choices) > 0 {
		choices, _ := json.Marshal(in.Choices)
		return json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","enum":` + string(choices) + `}},"required":["answer"]}`), true
	}
	if len(in.Schema) == 0 {
		return json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","title":"Answer"}},"required":["answer"]}`), true
	}
	if flatObject(in.Schema) {
		return in.Schema, false
	}
	return json.RawMessage(`{"type":"object","properties":{"answer":` + string(in.Schema) + `},"required":["answer"]}`), true
}

// flatObject reports whether a schema is an object whose properties are
// all primitives, as an elicitation form must be.
func flatObject(schema json.RawMessage) bool {
	var s struct {
		Type       string `json:"type"`
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || s.Type != "object" || len(s.Properties) == 0 {
		return false
	}
	for _, p := range s.Properties {
		switch p.Type {
		case "string", "number", "integer", "boolean":
		default:
			return false
		}
	}
	return true
}

func subtaskText(st tools.SubtaskRequest) string {
	var b strings.Builder
	b.WriteString(st.Description)
	if len(st.Inputs) > 0 {
		fmt.Fprintf(&b, "\n\nInputs: %s", st.Inputs)
	}
	if len(st.TemplateHints) > 0 {
		fmt.Fprintf(&b, "\n\nHints: %s", strings.Join(st.TemplateHints, ", "))
	}
	return b.String()
}

// resumed handles a 2026-07-28 client's retry of a call it was asked
// about: the answer resumes the execution (or, declined, cancels it), and
// the retry waits a while for what comes next.
func (s *Server) resumed(ctx context.Context, req *mcp.CallToolRequest, caller, id string) (*mcp.CallToolResult, error) {
	ex := s.opts.Executions
	if ex == nil {
		return nil, fmt.Errorf("no executions to resume")
	}
	rec, err := ex.Get(ctx, caller, id)
	if err == nil && rec.Called() != req.Params.Name {
		err = tools.Errorf(tools.ValidationError, "the request state names an execution of %q, not of %q", rec.Called(), req.Params.Name).
			WithCode(tools.CodeInvalidJSON).WithSuggestion("repeat the call as it was, with the request state you were given")
	}
	if err != nil {
		return errorResult(err), nil
	}
	if rec.Status != dispatch.StatusWaiting || rec.Wait == nil {
		return s.outcome(req, rec), nil
	}
	kind, answer, ok := answerOf(req.Params.InputResponses, rec.View().Waiting)
	if !ok {
		if _, err := ex.Cancel(ctx, caller, id); err != nil {
			return errorResult(err), nil
		}
		return declined(rec.Tool), nil
	}
	if rec, err = ex.Resume(ctx, caller, id, kind, answer); err != nil {
		return errorResult(err), nil
	}
	if rec, err = ex.Wait(ctx, caller, id, resumeWait); err != nil {
		return errorResult(err), nil
	}
	return s.outcome(req, rec), nil
}

// outcome renders an execution as it is now: its final envelope, another
// question, or where to follow it.
func (s *Server) outcome(req *mcp.CallToolRequest, rec *executions.Record) *mcp.CallToolResult {
	env := rec.View()
	switch {
	case rec.Status.Final():
		return render(env, s.hasOutputSchema(rec.Tool))
	case rec.Status == dispatch.StatusWaiting:
		return s.askOrDescribe(req, rec)
	}
	return describeRunning(env)
}

// answerOf reads the client's answer to the question it was asked: the
// elicitation's content (unwrapped as elicitSchema wrapped it), or the
// sampled message's text. ok is false when the user declined.
func answerOf(responses mcp.InputResponseMap, w *dispatch.Waiting) (kind string, answer json.RawMessage, ok bool) {
	switch w.For {
	case tools.WaitInput:
		er, _ := responses[inputAnswer].(*mcp.ElicitResult)
		if er == nil || er.Action != "accept" {
			return "", nil, false
		}
		var in tools.InputRequest
		_ = json.Unmarshal(w.Request, &in)
		var v any = er.Content
		if _, wrapped := elicitSchema(in); wrapped {
			v = er.Content["answer"]
		}
		b, err := json.Marshal(v)
		return tools.WaitInput, b, err == nil
	case tools.WaitSubtask:
		var content []mcp.Content
		switch cr := responses[inputSubtask].(type) {
		case *mcp.CreateMessageWithToolsResult: // how a response decodes
			content = cr.Content
		case *mcp.CreateMessageResult:
			content = []mcp.Content{cr.Content}
		default:
			return "", nil, false
		}
		b, err := json.Marshal(contentText(content))
		return tools.WaitSubtask, b, err == nil
	}
	return "", nil, false
}

// Where a person finishes what MCP cannot: the console's views (the
// console is a client of the same API routes: POST /approvals/{id}, POST
// /executions/{id}/resume).
const (
	consolePath          = "/console/#approvals"
	consoleQuestionsPath = "/console/#questions"
)

// waitText says what a waiting call waits for and exactly what finishes
// it outside MCP.
func waitText(env *dispatch.Envelope) string {
	w, id := env.Waiting, env.ExecutionID
	switch w.For {
	case tools.WaitApproval:
		return fmt.Sprintf("The call waits for a person's approval (execution %s): ask your user to decide on it in the "+
			"toold console (%s); it runs once they approve.", id, consolePath)
	case tools.WaitSubtask:
		return fmt.Sprintf("The tool handed over a subtask and waits for its result (execution %s): %s\nPerform it, then POST %s with {\"result\": ...}.",
			id, w.Request, w.Resume)
	}
	return fmt.Sprintf("The tool waits for an answer from the user (execution %s): %s\nThe user answers in the toold console (%s) or with POST %s and {\"answer\": ...}.",
		id, w.Request, consoleQuestionsPath, w.Resume)
}

// describeWait tells a client that cannot be asked what the call waits
// for and what finishes it: isError, so a model reads it rather than take
// it for the tool's result. A call waiting for approval is finished by
// repeating it once approved: the repeat joins the execution
// (executions.ParkOrJoin) and answers with its result.
func describeWait(env *dispatch.Envelope) *mcp.CallToolResult {
	w := env.Waiting
	var b strings.Builder
	b.WriteString(waitText(env))
	if w.For == tools.WaitApproval {
		b.WriteString("\nOnce it is decided, repeat this exact call (same tool, same arguments): it joins this execution and answers with its result, " +
			"rather than asking for another approval.")
	}
	fmt.Fprintf(&b, "\nGET /executions/%s shows its state; it waits until %s.", env.ExecutionID, w.ExpiresAt.Format(time.RFC3339))
	meta := mcp.Meta{MetaEnvelope: envelopeMeta(env), MetaWaiting: map[string]any{"execution_id": env.ExecutionID,
		"for": w.For, "request": w.Request, "resume": w.Resume, "expires_at": w.ExpiresAt}}
	return &mcp.CallToolResult{Meta: meta, IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}
}

func describeRunning(env *dispatch.Envelope) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{MetaEnvelope: envelopeMeta(env)}, IsError: true, Content: []mcp.Content{&mcp.TextContent{
		Text: fmt.Sprintf("The call goes on as execution %s (%s); GET /executions/%s?wait=30s for its result.", env.ExecutionID, env.Status, env.ExecutionID)}}}
}

func waitRefused(env *dispatch.Envelope, te *tools.Error) *mcp.CallToolResult {
	if te.Code == "" {
		te = te.WithCode(tools.CodeStoreUnavailable)
	}
	return render(dispatch.Failure(env.RequestID, env.Tool, dispatch.StatusRejected, te), true)
}

func errorResult(err error) *mcp.CallToolResult {
	te, ok := tools.AsError(err)
	if !ok {
		te = tools.Errorf(tools.SystemError, "the execution could not be resumed").Wrap(err)
	}
	return render(dispatch.Failure("", "", dispatch.StatusRejected, te), true)
}

// contentText joins a sampled message's text blocks.
func contentText(cs []mcp.Content) string {
	var parts []string
	for _, c := range cs {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}
