package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/tools"
)

// MCP tasks (2025-11-25). A client that declared the tasks capability may
// call a tool whose listing says execution.taskSupport "optional" (the
// tools that may wait for a person or a question) as a task: toold answers
// at once with the task, and the client follows it with tasks/get and
// takes its result with tasks/result. An MCP task IS a toold execution —
// the task id is the execution id, the call is accepted by the executions
// service (executions.Submit: its record and work message are written
// before the answer) and runs on whichever replica's worker takes it,
// through dispatch.Execute like every call; GET /executions/{id} shows the
// same execution, and any replica answers tasks/get. The SDK knows none of
// these methods, so toold serves them in front of it, over HTTP (front.go)
// and stdio (stdio.go) alike.
//
// Status: pending and running are "working"; waiting (for an approval, an
// answer, a subtask's result) is "input_required"; success is "completed";
// cancelled is "cancelled"; any other end — a tool error included, as the
// specification says for isError results — is "failed", whose tasks/result
// is the tool's CallToolResult as a plain call would have answered it.
// While a task waits for something the client can answer (an input, with
// elicitation; a subtask, with sampling), tasks/result asks it, with the
// task named in the request's _meta; anything else — an approval, or a
// client that cannot be asked — is answered outside MCP (the console,
// POST /approvals/{id}, POST /executions/{id}/resume), and tasks/result
// returns once it is.

// The _meta keys of tasks.
const (
	metaRelatedTask    = "io.modelcontextprotocol/related-task"
	metaModelImmediate = "io.modelcontextprotocol/model-immediate-response"
)

// taskPollMS is the polling interval toold suggests.
const taskPollMS = 1000

// taskPageSize is how many tasks one tasks/list page holds.
const taskPageSize = 50

func relatedTask(id string) map[string]string { return map[string]string{"taskId": id} }

// task is MCP's Task.
type task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTL is how long the task is kept, in milliseconds; null is unlimited.
	TTL          *int64 `json:"ttl"`
	PollInterval int64  `json:"pollInterval,omitempty"`
}

// taskStatus is an execution's status as a task's.
func taskStatus(st dispatch.Status) string {
	switch st {
	case dispatch.StatusPending, dispatch.StatusRunning:
		return "working"
	case dispatch.StatusWaiting:
		return "input_required"
	case dispatch.StatusSuccess:
		return "completed"
	case dispatch.StatusCancelled:
		return "cancelled"
	}
	return "failed"
}

// taskOf renders an execution as a task.
func (s *Server) taskOf(rec *executions.Record) task {
	t := task{TaskID: rec.ID, Status: taskStatus(rec.Status), StatusMessage: s.statusMessage(rec),
		CreatedAt: rec.CreatedAt.UTC().Format(time.RFC3339Nano), LastUpdatedAt: rec.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if !rec.UpdatedAt.IsZero() {
		t.LastUpdatedAt = rec.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	if keep := s.opts.Executions.Retention(); keep > 0 {
		ms := keep.Milliseconds()
		t.TTL = &ms
	}
	if !rec.Status.Final() {
		t.PollInterval = taskPollMS
	}
	return t
}

// statusMessage says what the task is doing, and for a task that waits,
// what finishes it.
func (s *Server) statusMessage(rec *executions.Record) string {
	env := rec.View()
	switch {
	case rec.Status == dispatch.StatusWaiting && env.Waiting != nil:
		return waitText(env)
	case rec.Status == dispatch.StatusPending:
		return "The call is accepted and waits for a worker."
	case rec.Status == dispatch.StatusRunning:
		return "The call runs."
	case env.Error != nil:
		return describe(env.Error)
	}
	return "The call " + string(rec.Status) + "."
}

// ownRequest reports whether toold answers m itself: a tasks method, or a
// task-augmented tools/call — where executions are kept (without a store
// toold declares no tasks, and a tools/call with a task is an ordinary
// call, as the specification says of a server without the capability).
// A tools/call is read here, once and strictly (readTaskCall), into
// m.call, which createTask runs: what is checked is what runs.
func (s *Server) ownRequest(m *wireMessage) bool {
	if !s.opts.Executions.Durable() || len(m.ID) == 0 {
		return false
	}
	if v2Request(*m) {
		return true
	}
	switch m.Method {
	case "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
		return true
	case "tools/call":
		m.call, m.callErr = readTaskCall(m.raw)
		if m.callErr == nil {
			return present(json.RawMessage(m.call.Params.Task))
		}
		// Not acceptable strictly: refused here if it asks for a task
		// (as encoding/json, the SDK's reader, sees it); any other call
		// is the SDK's, as before.
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		return json.Unmarshal(m.Params, &p) == nil && present(p.Task)
	}
	return false
}

// taskCall is a task-augmented tools/call as toold runs it.
type taskCall struct {
	Params struct {
		Name      string         `json:"name"`
		Arguments jsontext.Value `json:"arguments"`
		Task      jsontext.Value `json:"task"`
		Meta      map[string]any `json:"_meta"`
	} `json:"params"`
}

// readTaskCall reads a tools/call message in one pass, strictly
// (encoding/json/v2's rules, go-json-experiment's implementation): one
// JSON value, valid UTF-8, member names as written, and no member twice
// anywhere in it — encoding/json keeps the last of two, so a check could
// see one name, or one task, and the run another.
func readTaskCall(raw []byte) (*taskCall, error) {
	var c taskCall
	if err := jsonv2.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// serveOwnRequest answers one of ownRequest's requests for the caller in
// ctx, through p (which tasks/result streams to), and returns the
// JSON-RPC response message.
func (s *Server) serveOwnRequest(ctx context.Context, p *peer, m wireMessage) []byte {
	if _, ok := plainID(m.ID); !ok || m.JSONRPC != "2.0" {
		return responseMessage(nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
			Message: "Invalid Request: a JSON-RPC 2.0 request with a string or integer id"})
	}
	var res any
	var err *jsonrpc.Error
	switch {
	case v2Request(m):
		res, err = s.serveTaskV2(ctx, m)
	case m.Method == "tools/call":
		res, err = s.createTask(ctx, p, m.call, m.callErr)
	case m.Method == "tasks/get":
		res, err = s.withTask(ctx, m.Params, func(rec *executions.Record) (any, *jsonrpc.Error) { return s.taskOf(rec), nil })
	case m.Method == "tasks/result":
		res, err = s.withTask(ctx, m.Params, func(rec *executions.Record) (any, *jsonrpc.Error) { return s.taskResult(ctx, p, rec) })
	case m.Method == "tasks/list":
		res, err = s.listTasks(ctx, m.Params)
	case m.Method == "tasks/cancel":
		res, err = s.withTask(ctx, m.Params, func(rec *executions.Record) (any, *jsonrpc.Error) { return s.cancelTask(ctx, rec) })
	}
	return responseMessage(m.ID, res, err)
}

// responseMessage is the response to the request with id (echoed as
// sent): the result, or the error.
func responseMessage(id json.RawMessage, res any, rpcErr *jsonrpc.Error) []byte {
	out := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id, Result: res, Error: rpcErr}
	if len(id) == 0 {
		out.ID = json.RawMessage("null")
	}
	b, err := json.Marshal(out)
	if err != nil {
		b, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", out.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the result could not be encoded"}})
	}
	return b
}

func invalidParams(format string, args ...any) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// withTask runs fn on the caller's task that params name. Tasks are bound
// to their caller: another caller's task is unknown, as a task that never
// was.
func (s *Server) withTask(ctx context.Context, params json.RawMessage, fn func(*executions.Record) (any, *jsonrpc.Error)) (any, *jsonrpc.Error) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(params, &p) != nil || p.TaskID == "" {
		return nil, invalidParams("params.taskId is required: the id tools/call answered with")
	}
	who, err := caller(ctx)
	if err != nil {
		return nil, noCaller()
	}
	rec, err := s.opts.Executions.Get(ctx, who.Name, p.TaskID)
	if err != nil {
		if te, ok := tools.AsError(err); ok && te.Kind == tools.NotFound {
			return nil, invalidParams("Failed to retrieve task: there is no task %q for this caller (tasks are kept for %v after their last change)",
				p.TaskID, s.opts.Executions.Retention())
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be read: " + s.opts.Dispatcher.RedactText(err.Error())}
	}
	if rec.Kind != "call" {
		return nil, invalidParams("Failed to retrieve task: %q is a batch, not a tool call; GET /executions/%s shows it", p.TaskID, p.TaskID)
	}
	return fn(rec)
}

// createTask accepts a task-augmented tools/call as an execution (c, as
// ownRequest read it) and answers with its task.
func (s *Server) createTask(ctx context.Context, p *peer, c *taskCall, readErr error) (any, *jsonrpc.Error) {
	if readErr != nil || c == nil {
		return nil, invalidParams("the call is not acceptable JSON: %v; send each member once, in valid UTF-8",
			s.opts.Dispatcher.RedactText(fmt.Sprint(readErr)))
	}
	call := &c.Params
	pr, err := caller(ctx)
	if err != nil {
		return nil, noCaller()
	}
	allowed := s.allowed(ctx, pr) // the key's tools, within the toolset the request came through
	e := s.entry(call.Name)
	if e == nil || !allowed(e.Spec.Name) {
		return nil, invalidParams("unknown tool %q", call.Name)
	}
	if e.MCP().Execution == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf(
			"the tool %q does not run as a task (its execution.taskSupport is forbidden); call it without params.task", call.Name)}
	}
	args := []byte(call.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	token, _ := call.Meta[MetaConfirmToken].(string)
	rec, env, err := s.opts.Executions.Submit(ctx, executions.Call{Tool: e.Spec.Name, Body: args, RequestID: requestID(ctx),
		Caller: pr.Name, Principal: pr.Who(), Allowed: allowed, ConfirmToken: token, Raw: true})
	switch {
	case err != nil:
		te, _ := tools.AsError(err)
		msg := "the task could not be kept"
		if te != nil {
			msg += ": " + te.Message
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
	case env != nil:
		data, _ := json.Marshal(env.Error)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: describe(env.Error), Data: data}
	}
	s.log.Info("mcp task", zap.String("tool", e.Spec.Name), zap.String("execution_id", rec.ID), zap.String("caller", pr.Name))
	if p != nil && p.stdio {
		go s.watchTask(ctx, p, rec) // the session's context: it ends with the session
	}
	return map[string]any{"task": s.taskOf(rec), "_meta": map[string]any{metaModelImmediate: s.immediateText(e.Spec, rec)}}, nil
}

// immediateText is what a host may give the model at once while the task
// runs: what it waits for, and that its result comes later.
func (s *Server) immediateText(spec tools.Spec, rec *executions.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The call of %s runs as task %s; its result comes when it ends.", spec.Name, rec.ID)
	switch {
	case spec.Confirmation == tools.ConfirmHuman:
		fmt.Fprintf(&b, " It waits for a person's approval first: ask your user to decide on it in the toold console (%s).",
			consolePath)
	case spec.Pauses:
		b.WriteString(" The tool may ask the user a question on the way.")
	}
	return b.String()
}

// taskResult blocks until the task ends and answers what the call would
// have: its CallToolResult, naming the task. On the way it asks the client
// what the task waits for, where it can answer, and tells it of each
// change of status.
func (s *Server) taskResult(ctx context.Context, p *peer, rec *executions.Record) (any, *jsonrpc.Error) {
	if !rec.Status.Final() {
		ctx, done := s.calls.track(ctx, rec.Caller, "")
		defer done()
		if p == nil {
			p = &peer{caps: func() clientCaps { return clientCaps{} }}
		}
		notify := func(r *executions.Record) { s.notifyStatus(p, r) }
		if !p.stdio {
			notify(rec) // starts the stream: the client sees the task's state at once
			stop := s.keepalive(p)
			defer stop()
		}
		var err error
		if rec, err = s.follow(ctx, p, rec, true, notify); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("the task %s goes on, but this request ended before it did; call tasks/result again", rec.ID)}
		}
	}
	res := render(rec.View(), s.hasOutputSchema(rec.Tool))
	res.Meta[metaRelatedTask] = relatedTask(rec.ID)
	return res, nil
}

// keepalive sends a comment on the peer's stream every half minute, so a
// long wait is not closed as idle on the way; stop ends it.
func (s *Server) keepalive(p *peer) (stop func()) {
	if p.heartbeat == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if p.heartbeat() != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// notifyStatus tells the peer a task's status (notifications/tasks/status).
func (s *Server) notifyStatus(p *peer, rec *executions.Record) {
	msg, err := json.Marshal(outNotification{JSONRPC: "2.0", Method: "notifications/tasks/status", Params: s.taskOf(rec)})
	if err == nil {
		_ = p.send(msg)
	}
}

// watchTask tells a stdio client of each change of a task it created,
// until the task ends or the session does.
func (s *Server) watchTask(ctx context.Context, p *peer, rec *executions.Record) {
	ctx, done := s.calls.track(ctx, rec.Caller, "")
	defer done()
	if p.answered != nil {
		// Not before the tools/call answer that names the task: a task
		// that pauses at once would otherwise be told of first (a client
		// cannot follow a task it has not heard of).
		select {
		case <-p.answered:
		case <-ctx.Done():
			return
		}
	}
	for !rec.Status.Final() {
		next, err := s.opts.Executions.WaitChange(ctx, rec, time.Minute)
		if err != nil || ctx.Err() != nil {
			return
		}
		if next.Status != rec.Status || next.Step != rec.Step {
			s.notifyStatus(p, next)
		}
		rec = next
	}
}

// listTasks lists the caller's tasks (its executions of tool calls),
// newest first.
func (s *Server) listTasks(ctx context.Context, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	if len(params) > 0 && json.Unmarshal(params, &p) != nil {
		return nil, invalidParams("params must be an object with an optional cursor")
	}
	if p.Cursor != "" && !executions.ValidID(p.Cursor) {
		return nil, invalidParams("the cursor %q is not one tasks/list answered with", p.Cursor)
	}
	who, err := caller(ctx)
	if err != nil {
		return nil, noCaller()
	}
	recs, next, err := s.opts.Executions.ListRecords(ctx, who.Name, executions.Filter{Kind: "call"}, p.Cursor, taskPageSize)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tasks could not be listed: " + s.opts.Dispatcher.RedactText(err.Error())}
	}
	out := struct {
		Tasks      []task `json:"tasks"`
		NextCursor string `json:"nextCursor,omitempty"`
	}{Tasks: make([]task, 0, len(recs)), NextCursor: next}
	for _, r := range recs {
		out.Tasks = append(out.Tasks, s.taskOf(r))
	}
	return out, nil
}

// cancelTask cancels the task and answers it as it is then: cancelled,
// unless it ended first.
func (s *Server) cancelTask(ctx context.Context, rec *executions.Record) (any, *jsonrpc.Error) {
	if rec.Status.Final() {
		return nil, invalidParams("Cannot cancel task: already in terminal status '%s'", taskStatus(rec.Status))
	}
	ex := s.opts.Executions
	got, err := ex.Cancel(ctx, rec.Caller, rec.ID)
	if err == nil && !got.Status.Final() {
		// A running call is told to stop; wait a little for it to.
		got, err = ex.WaitFinal(ctx, rec.Caller, rec.ID, 5*time.Second)
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be cancelled: " + s.opts.Dispatcher.RedactText(err.Error())}
	}
	return s.taskOf(got), nil
}
