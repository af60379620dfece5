package executions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// BatchRequest is the body of POST /batch.
type BatchRequest struct {
	Calls       []BatchCall `json:"calls"`
	MaxParallel int         `json:"max_parallel,omitempty"`
	StopOnError bool        `json:"stop_on_error,omitempty"`
}

// BatchCall is one call of a batch.
type BatchCall struct {
	// ID names the call in the answer; the call's index when not given.
	ID        string          `json:"id,omitempty"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// BatchResult is the one document a batch answers with.
type BatchResult struct {
	Results         []BatchItem `json:"results"`
	SuccessCount    int         `json:"success_count"`
	FailureCount    int         `json:"failure_count"`
	TotalDurationMS float64     `json:"total_duration_ms"`
	MaxDurationMS   float64     `json:"max_duration_ms"`
}

// BatchItem is one call's envelope, in the order of the request.
type BatchItem struct {
	ID       string             `json:"id"`
	Envelope *dispatch.Envelope `json:"envelope"`
}

// ParseBatch reads a batch body strictly: one JSON object of known fields,
// 1 to max calls, each naming a tool, ids unique and well-formed,
// max_parallel at most max (0: all at once). Every problem is listed by
// pointer. argsDepth bounds the nesting of each call's arguments, as the
// pipeline bounds a single call's.
func ParseBatch(body []byte, max, argsDepth int) (*BatchRequest, *tools.Error) {
	var b BatchRequest
	// The arguments sit three levels in: {"calls": [{"arguments": ...}]}.
	if err := strictjson.DecodeInto(body, argsDepth+3, &b); err != nil {
		if _, notJSON := errors.AsType[*strictjson.Error](err); notJSON {
			return nil, tools.Errorf(tools.ValidationError, "the batch is not acceptable JSON: %v", err).WithCode(tools.CodeInvalidJSON).
				WithSuggestion(`send {"calls": [{"id": "a", "tool": "read_file", "arguments": {...}}]}`)
		}
		return nil, tools.Errorf(tools.ValidationError, "the batch does not have the expected shape: %v", err).WithCode(tools.CodeInvalidBatch).
			WithSuggestion(`send {"calls": [{"id": "a", "tool": "read_file", "arguments": {...}}], "max_parallel": 4, "stop_on_error": false}`)
	}
	var fields []tools.FieldError
	add := func(ptr, format string, args ...any) {
		fields = append(fields, tools.FieldError{Pointer: ptr, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case len(b.Calls) == 0:
		add("/calls", "must hold at least one call")
	case len(b.Calls) > max:
		add("/calls", "holds %d calls; a batch may hold at most %d", len(b.Calls), max)
	}
	seen := map[string]int{}
	for i, c := range b.Calls {
		ptr := "/calls/" + strconv.Itoa(i)
		if c.Tool == "" {
			add(ptr+"/tool", "is required")
		} else if !tools.NamePattern.MatchString(c.Tool) {
			add(ptr+"/tool", "%q is not a tool name", c.Tool)
		}
		if c.ID == "" {
			b.Calls[i].ID = strconv.Itoa(i)
		} else if len(c.ID) > 64 {
			add(ptr+"/id", "is longer than 64 characters")
		}
		if j, dup := seen[b.Calls[i].ID]; dup {
			add(ptr+"/id", "%q is also the id of call %d; ids must be unique", b.Calls[i].ID, j)
		}
		seen[b.Calls[i].ID] = i
		if a := bytes.TrimSpace(c.Arguments); len(a) > 0 && a[0] != '{' {
			add(ptr+"/arguments", "must be an object")
		}
	}
	if b.MaxParallel < 0 || b.MaxParallel > max {
		add("/max_parallel", "must be between 0 (all at once) and %d", max)
	}
	if len(fields) > 0 {
		e := tools.Errorf(tools.ValidationError, "the batch has %d problem(s): %s %s", len(fields), fields[0].Pointer, fields[0].Message)
		e.Fields = fields
		return nil, e.WithCode(tools.CodeInvalidBatch).WithSuggestion("fix the fields listed; a batch holds at most %d calls with unique ids", max)
	}
	return &b, nil
}

// Batch runs a batch now: each call through the pipeline (its own
// bulkhead, deadline and sanitizers), max_parallel at a time, in order of
// the request, each for the principal ctx carries (auth.IdentityFrom). With stop_on_error, calls not yet started when one fails
// are not run and say so.
func (s *Service) Batch(ctx context.Context, b *BatchRequest, caller, requestID string, allowed func(string) bool) *BatchResult {
	return s.runBatch(ctx, b, caller, requestID, allowed, false)
}

// runBatch is Batch; charged says the calls were charged their
// principal's rate already (an async batch, when it was accepted).
func (s *Service) runBatch(ctx context.Context, b *BatchRequest, caller, requestID string, allowed func(string) bool, charged bool) *BatchResult {
	s.m.batches.Inc()
	start := time.Now()
	res := &BatchResult{Results: make([]BatchItem, len(b.Calls))}
	parallel := b.MaxParallel
	if parallel == 0 {
		parallel = len(b.Calls)
	}
	sem := make(chan struct{}, parallel)
	var mu sync.Mutex
	failed := false
	var wg sync.WaitGroup
	for i, c := range b.Calls {
		res.Results[i].ID = c.ID
		sem <- struct{}{}
		mu.Lock()
		stop := failed && b.StopOnError
		mu.Unlock()
		if stop {
			<-sem
			res.Results[i].Envelope = skipped(requestID+"."+c.ID, c.Tool)
			s.disp.Redact(res.Results[i].Envelope) // it names the tool as sent
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			req := dispatch.NewRequest(c.Tool, c.Arguments, requestID+"."+c.ID,
				dispatch.From{Name: caller, Identity: auth.IdentityFrom(ctx), Allowed: allowed})
			req.Via = policy.ViaBatch
			req.Charged = charged
			env := s.disp.Execute(ctx, req)
			if env.Status == dispatch.StatusWaiting {
				env = cannotWait(env)
			}
			res.Results[i].Envelope = env
			if !env.Success {
				mu.Lock()
				failed = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, it := range res.Results {
		if it.Envelope.Success {
			res.SuccessCount++
		} else {
			res.FailureCount++
		}
		res.MaxDurationMS = max(res.MaxDurationMS, it.Envelope.DurationMS)
	}
	res.TotalDurationMS = float64(time.Since(start).Microseconds()) / 1000
	return res
}

func skipped(requestID, tool string) *dispatch.Envelope {
	return dispatch.Failure(requestID, tool, dispatch.StatusRejected, tools.Errorf(tools.UserError,
		"not run: an earlier call of the batch failed and stop_on_error is set").WithCode(tools.CodeSkipped).
		WithSuggestion("fix the failed call, then send the calls that were skipped"))
}

// cannotWait answers a batch's call that paused (a tool asking for an
// answer or a subtask, or a call waiting for a person's approval): a call
// of a batch has no execution of its own to wait in and be resumed.
func cannotWait(env *dispatch.Envelope) *dispatch.Envelope {
	return dispatch.Failure(env.RequestID, env.Tool, dispatch.StatusRejected, tools.Errorf(tools.UserError,
		"the call waits for %s, which a call in a batch cannot do", waitNoun(env.Waiting.For)).WithCode(tools.CodeWaitsInBatch).
		WithSuggestion("call the tool on its own (POST /tools/%s/execute): its execution waits and is resumed", env.Tool))
}

// batchEnvelope runs an async batch; its envelope's data is the batch
// document. A batch stopped by a cancel or a drain fails with the stop's
// error, as a single call does, so the worker ends it the same way
// (cancelled, run again, or interrupted); the document still says what
// each call did.
func (s *Service) batchEnvelope(ctx context.Context, r *Record) *dispatch.Envelope {
	start := time.Now()
	res := s.runBatch(auth.WithIdentity(ctx, r.Principal), r.Batch, r.Caller, r.RequestID, s.allowedFor(r), true)
	data, _ := json.Marshal(res)
	env := &dispatch.Envelope{RequestID: r.RequestID, Status: dispatch.StatusSuccess, Success: true}
	if te, ok := tools.AsError(context.Cause(ctx)); ok {
		env = dispatch.Failure(r.RequestID, "", dispatch.StatusError, te)
	}
	env.Data, env.StartedAt, env.DurationMS = data, start.UTC(), res.TotalDurationMS
	return env
}
