package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
)

// Following an execution for a client that toold asks itself: a client
// before 2026-07-28 that declared elicitation (or sampling), over stdio or
// on an HTTP request whose answer became an event stream, and a task's
// tasks/result. Whenever the execution waits for something the client can
// answer, toold sends it the question as a request of its own
// (elicitation/create, sampling/createMessage); the answer resumes the
// execution (answers.go), the tool's next step runs through the pipeline,
// and the follower sees the record move on.

// followStep bounds one wait for the record to change, so an error answer
// to a question (which changes no record) is seen within it.
const followStep = time.Second

// follow follows the caller's execution rec for the peer p: whenever it
// waits for something p can answer, p is asked (once a step); whenever it
// changes, onChange (if any) is told. It returns the execution once it is
// final or — unless untilFinal — waits for something p cannot answer (an
// approval) or p answered with an error; with untilFinal it follows it to
// its end. It returns the execution as it is when ctx ends, with ctx's
// error.
func (s *Server) follow(ctx context.Context, p *peer, rec *executions.Record, untilFinal bool, onChange func(*executions.Record)) (*executions.Record, error) {
	ex := s.opts.Executions
	asked, refused := -1, -1
	var answers chan askAnswer
	for !rec.Status.Final() {
		if rec.Status == dispatch.StatusWaiting && rec.Wait != nil {
			can := p.canAsk(rec.Wait.For) && refused != rec.Step
			switch {
			case can && asked != rec.Step:
				id, err := s.ask(p, rec, untilFinal)
				if err != nil {
					return rec, err
				}
				asked, answers = rec.Step, s.asks.open(id, rec.Caller)
				defer s.asks.close(id)
			case !can && !untilFinal:
				return rec, nil
			}
		}
		next, err := ex.WaitChange(ctx, rec, followStep)
		if err != nil {
			return rec, err
		}
		if err := ctx.Err(); err != nil {
			return next, err
		}
		select {
		case ans := <-answers:
			if ans.err != nil && next.Step == asked {
				refused = asked // the client cannot answer: describe, or wait for another way
			}
		default:
		}
		if onChange != nil && (next.Status != rec.Status || next.Step != rec.Step) {
			onChange(next)
		}
		rec = next
	}
	return rec, nil
}

// ask sends p the question rec waits for, as a request whose id names the
// step; for a task, the request carries the task it belongs to.
func (s *Server) ask(p *peer, rec *executions.Record, task bool) (string, error) {
	q := question(rec.View().Waiting)
	if q == nil {
		return "", errors.New("mcpserver: the wait cannot be asked")
	}
	params, err := json.Marshal(q.req)
	if err != nil {
		return "", err
	}
	if task {
		params = withMeta(params, metaRelatedTask, relatedTask(rec.ID))
	}
	id := execAskID(rec.ID, rec.Step)
	msg, err := json.Marshal(outRequest{JSONRPC: "2.0", ID: id, Method: q.method(), Params: params})
	if err != nil {
		return "", err
	}
	return id, p.send(msg)
}

// askConfirm asks p's user to confirm a call that needs a confirmation
// token, as a yes/no form. answered is false when no answer came before
// the token expired, ctx ended, or the client answered with an error; the
// caller then answers with the token to repeat.
func (s *Server) askConfirm(ctx context.Context, p *peer, caller string, env *dispatch.Envelope) (accepted, answered bool) {
	id := confirmAskID()
	ch := s.asks.open(id, caller)
	defer s.asks.close(id)
	params, err := json.Marshal(&mcp.ElicitParams{Mode: "form", RequestedSchema: confirmSchema,
		Message: "Run the tool " + env.Tool + "? " + env.Error.Message})
	if err != nil {
		return false, false
	}
	msg, err := json.Marshal(outRequest{JSONRPC: "2.0", ID: id, Method: "elicitation/create", Params: params})
	if err != nil || p.send(msg) != nil {
		return false, false
	}
	timer := time.NewTimer(max(time.Until(confirmExpiry(env.Error)), time.Second))
	defer timer.Stop()
	select {
	case ans := <-ch:
		var er mcp.ElicitResult
		if ans.err != nil || json.Unmarshal(ans.result, &er) != nil {
			return false, false
		}
		return er.Action == "accept" && er.Content["confirm"] == true, true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false, false
}

// outRequest is a request of toold's own to a client.
type outRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      string          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// outNotification is a notification of toold's own to a client.
type outNotification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// withMeta sets _meta[key] in a params object.
func withMeta(params json.RawMessage, key string, v any) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil || m == nil {
		m = map[string]json.RawMessage{}
	}
	meta := map[string]any{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[key] = v
	b, err := json.Marshal(meta)
	if err != nil {
		return params
	}
	m["_meta"] = b
	out, err := json.Marshal(m)
	if err != nil {
		return params
	}
	return out
}
