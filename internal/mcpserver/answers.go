package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// toold's own requests to a client, and their answers. Each request id
// says what it asks, so the answer is understood wherever it arrives:
//
//   - "toold/exec/<execution>/<step>" asks for what an execution waits
//     for (an input, a subtask's result). The answer resumes it through
//     the executions service — on any replica, whichever one asked.
//   - "toold/confirm/<nonce>" asks the user to confirm a call that needs a
//     confirmation token. Only the asker knows the token, so its answer is
//     understood on the replica that asked (always, over stdio; behind a
//     load balancer without affinity an answer landing elsewhere is
//     dropped, and the call answers with the token to repeat).
//
// Ids are strings, so they never meet the SDK's own requests' integer ids.
const ownIDPrefix = "toold/"

// execAskID asks for what step of an execution waits for.
func execAskID(execID string, step int) string {
	return ownIDPrefix + "exec/" + execID + "/" + strconv.Itoa(step)
}

func confirmAskID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return ownIDPrefix + "confirm/" + hex.EncodeToString(b[:])
}

// askAnswer is a client's response to one of toold's requests.
type askAnswer struct {
	result json.RawMessage
	err    *jsonrpc.Error
}

// asks are toold's requests waiting for their answer on this replica,
// each with the caller it was asked of: only that caller's answer is
// taken. An id names an execution (or a nonce) and may be seen by others
// (an execution id is in its Location); an answer — an error answer
// included, which stops toold asking — is the asked caller's to give.
type asks struct {
	mu sync.Mutex
	m  map[string]ask
}

type ask struct {
	ch     chan askAnswer
	caller string
}

func newAsks() *asks { return &asks{m: map[string]ask{}} }

// open starts waiting for the answer of caller to the request id.
func (a *asks) open(id, caller string) chan askAnswer {
	ch := make(chan askAnswer, 1)
	a.mu.Lock()
	a.m[id] = ask{ch: ch, caller: caller}
	a.mu.Unlock()
	return ch
}

func (a *asks) close(id string) {
	a.mu.Lock()
	delete(a.m, id)
	a.mu.Unlock()
}

// deliver hands caller's answer to the request id to its asker, if
// caller is the one it was asked of; it reports whether it did.
func (a *asks) deliver(id, caller string, ans askAnswer) bool {
	a.mu.Lock()
	k, ok := a.m[id]
	a.mu.Unlock()
	if !ok || k.caller != caller {
		return false
	}
	select {
	case k.ch <- ans:
	default:
	}
	return true
}

// ownAnswer reads a message that answers one of toold's requests: its id,
// and the answer; ok is false for any other message.
func ownAnswer(m wireMessage) (string, askAnswer, bool) {
	var id string
	if m.Method != "" || json.Unmarshal(m.ID, &id) != nil || !strings.HasPrefix(id, ownIDPrefix) {
		return "", askAnswer{}, false
	}
	ans := askAnswer{result: m.Result}
	if len(m.Error) > 0 {
		ans.err = &jsonrpc.Error{}
		if json.Unmarshal(m.Error, ans.err) != nil {
			ans.err.Code, ans.err.Message = jsonrpc.CodeInternalError, "the client's error could not be read"
		}
	}
	return id, ans, true
}

// answered takes a client's answer to one of toold's requests: the asker
// on this replica is told, and an execution's answer resumes it (or, the
// user having declined, cancels it) — each only when caller is the one
// asked (applyAnswer reads the execution as caller's: another's is not
// found).
func (s *Server) answered(ctx context.Context, caller, id string, ans askAnswer) {
	if !s.asks.deliver(id, caller, ans) && strings.HasPrefix(id, ownIDPrefix+"confirm/") {
		s.log.Info("mcp: an answer to a question toold did not ask this caller was dropped")
		return
	}
	rest, ok := strings.CutPrefix(id, ownIDPrefix+"exec/")
	if !ok || ans.err != nil || s.opts.Executions == nil {
		return
	}
	execID, stepText, _ := strings.Cut(rest, "/")
	step, err := strconv.Atoi(stepText)
	if err != nil {
		return
	}
	if err := s.applyAnswer(ctx, caller, execID, step, ans.result); err != nil {
		s.log.Info("mcp: an answer to toold's question was not taken", zap.String("execution_id", execID), zap.Error(err))
	}
}

// applyAnswer resumes step of the caller's execution with the client's
// answer (an elicitation's or a sampling request's result), or cancels it
// when the user declined. An answer to a step that no longer waits is
// dropped: the execution moved on without it (answered through the API,
// cancelled, expired).
func (s *Server) applyAnswer(ctx context.Context, caller, execID string, step int, result json.RawMessage) error {
	ex := s.opts.Executions
	rec, err := ex.Get(ctx, caller, execID)
	if err != nil {
		return err
	}
	if rec.Status != dispatch.StatusWaiting || rec.Step != step || rec.Wait == nil {
		return nil
	}
	w := rec.View().Waiting
	responses := mcp.InputResponseMap{}
	switch w.For {
	case tools.WaitInput:
		var er mcp.ElicitResult
		if json.Unmarshal(result, &er) == nil {
			responses[inputAnswer] = &er
		}
	case tools.WaitSubtask:
		var cr mcp.CreateMessageResult
		if json.Unmarshal(result, &cr) == nil {
			responses[inputSubtask] = &cr
		}
	}
	kind, answer, ok := answerOf(responses, w)
	if !ok {
		_, err = ex.Cancel(ctx, caller, execID)
		return err
	}
	_, err = ex.Resume(ctx, caller, execID, kind, answer)
	return err
}
