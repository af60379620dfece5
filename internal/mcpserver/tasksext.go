package mcpserver

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/tools"
)

// The tasks extension (io.modelcontextprotocol/tasks) for 2026-07-28
// clients. There the server decides, call by call, whether to answer with
// a task; the client declares the extension in each request's
// capabilities. toold answers with a task where nothing else finishes the
// call inside MCP: a call that waits for a person's approval. A question
// or a subtask is asked in the call itself (multi-round-trip requests,
// waits.go), as the extension advises for what comes before a task. The
// task is the execution, as with 2025-11-25 tasks (tasks.go); tasks/get
// carries its result inline once it ends, and what it asks of the client
// while it waits (inputRequests, answered with tasks/update).
//
// Status: waiting for an approval is "working" (the client has nothing to
// give; statusMessage says who decides, where); waiting for an answer or a
// subtask's result is "input_required"; every end is "completed" with the
// call's result — a tool's error included, as the extension says — except
// a cancelled task; "failed" (a JSON-RPC error) never happens, since the
// call was accepted.

const tasksExtension = "io.modelcontextprotocol/tasks"

// metaTaskCreated marks a tools/call result that the middleware answers as
// a task (taskCreated): the SDK's CallToolResult has no such shape.
const metaTaskCreated = "toold/task-created"

// taskV2 is the extension's Task, with its status's payload.
type taskV2 struct {
	ResultType     string              `json:"resultType"`
	TaskID         string              `json:"taskId"`
	Status         string              `json:"status"`
	StatusMessage  string              `json:"statusMessage,omitempty"`
	CreatedAt      string              `json:"createdAt"`
	LastUpdatedAt  string              `json:"lastUpdatedAt"`
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	InputRequests  json.RawMessage     `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

// taskV2Of renders an execution as the extension's task; resultType is
// "task" when it is created, "complete" in tasks/get.
func (s *Server) taskV2Of(rec *executions.Record, resultType string) taskV2 {
	v1 := s.taskOf(rec)
	t := taskV2{ResultType: resultType, TaskID: v1.TaskID, Status: v1.Status, StatusMessage: v1.StatusMessage,
		CreatedAt: v1.CreatedAt, LastUpdatedAt: v1.LastUpdatedAt, TTLMs: v1.TTL, PollIntervalMs: v1.PollInterval}
	switch {
	case rec.Status == dispatch.StatusCancelled:
	case rec.Status.Final():
		t.Status, t.Result = "completed", render(rec.View(), s.hasOutputSchema(rec.Tool))
	case rec.Status == dispatch.StatusWaiting && rec.Wait != nil:
		if q := question(rec.View().Waiting); q != nil {
			t.InputRequests, _ = json.Marshal(mcp.InputRequestMap{execAskID(rec.ID, rec.Step): q.req})
		} else {
			t.Status = "working" // an approver's to give, not the client's
		}
	}
	return t
}

// taskCreated is a tools/call answered with a task.
type taskCreated struct {
	*mcp.CallToolResult
	task taskV2
}

func (r taskCreated) MarshalJSON() ([]byte, error) { return json.Marshal(r.task) }

// asTaskV2 answers a 2026-07-28 call that waits for an approval with its
// task, where the client declared the extension; nil otherwise.
func (s *Server) asTaskV2(req *mcp.CallToolRequest, rec *executions.Record) *mcp.CallToolResult {
	caps := roundTrips(req)
	if caps == nil || caps.Extensions[tasksExtension] == nil || rec.Status != dispatch.StatusWaiting ||
		rec.Wait == nil || rec.Wait.For != tools.WaitApproval {
		return nil
	}
	return &mcp.CallToolResult{Meta: mcp.Meta{metaTaskCreated: s.taskV2Of(rec, "task")}}
}

// v2Request reports whether m is the extension's: tasks/get, tasks/update
// or tasks/cancel of the 2026-07-28 protocol (its _meta says so).
func v2Request(m wireMessage) bool {
	switch m.Method {
	case "tasks/get", "tasks/update", "tasks/cancel":
	default:
		return false
	}
	return metaVersion(m.Params) >= multiRoundTrip
}

// metaVersion is the protocol version a request's _meta names ("" none).
func metaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var v string
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v) != nil {
		return ""
	}
	return v
}

// declaresExtension reports whether a request's capabilities name the
// tasks extension.
func declaresExtension(params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	return json.Unmarshal(params, &p) == nil && json.Unmarshal(p.Meta[mcp.MetaKeyClientCapabilities], &caps) == nil &&
		present(caps.Extensions[tasksExtension])
}

// serveTaskV2 answers one of the extension's requests for the caller.
func (s *Server) serveTaskV2(ctx context.Context, m wireMessage) (any, *jsonrpc.Error) {
	if !declaresExtension(m.Params) {
		data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: map[string]any{}}}})
		return nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "Missing required client capability: " +
			"declare the " + tasksExtension + " extension in the request's capabilities", Data: data}
	}
	return s.withTask(ctx, m.Params, func(rec *executions.Record) (any, *jsonrpc.Error) {
		switch m.Method {
		case "tasks/update":
			return s.updateTask(ctx, rec, m.Params)
		case "tasks/cancel":
			if !rec.Status.Final() {
				if _, err := s.opts.Executions.Cancel(ctx, rec.Caller, rec.ID); err != nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the task could not be cancelled: " +
						s.opts.Dispatcher.RedactText(err.Error())}
				}
			}
			return map[string]string{"resultType": "complete"}, nil
		}
		return s.taskV2Of(rec, "complete"), nil
	})
}

// updateTask takes the client's answers to what the task asked: the one
// outstanding request resumes it; answers to keys not outstanding are
// ignored, as the extension says.
func (s *Server) updateTask(ctx context.Context, rec *executions.Record, params json.RawMessage) (any, *jsonrpc.Error) {
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil, invalidParams("params.inputResponses must be an object of responses by the keys tasks/get gave")
	}
	for key, raw := range p.InputResponses {
		rest, ok := strings.CutPrefix(key, ownIDPrefix+"exec/"+rec.ID+"/")
		if !ok || rest != strconv.Itoa(rec.Step) {
			continue
		}
		if err := s.applyAnswer(ctx, rec.Caller, rec.ID, rec.Step, raw); err != nil {
			te, _ := tools.AsError(err)
			msg := "the answer was not taken"
			if te != nil {
				msg += ": " + te.Message
			}
			return nil, invalidParams("%s", msg)
		}
	}
	return map[string]string{"resultType": "complete"}, nil
}

// discoverWithTasks adds the extension to a server/discover answer, where
// toold keeps executions.
func (s *Server) discoverWithTasks(r *mcp.DiscoverResult) *mcp.DiscoverResult {
	if !s.opts.Executions.Durable() || r.Capabilities == nil {
		return r
	}
	cp, caps := *r, *r.Capabilities
	caps.Extensions = map[string]any{tasksExtension: map[string]any{}}
	for k, v := range r.Capabilities.Extensions {
		caps.Extensions[k] = v
	}
	cp.Capabilities = &caps
	return &cp
}
