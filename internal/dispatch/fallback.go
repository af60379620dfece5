package dispatch

import (
	"context"
	"time"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// fallsBack reports whether a failure is one another tool may get past: a
// timeout, an overload (a full queue, a rate limit, an open circuit
// breaker), a result that could not be used, a system error such as an
// upstream that is down. A refusal the caller caused (validation,
// permission, security, confirmation) would fail the same way elsewhere;
// a caller who left or a replica shutting down wants no more work.
func fallsBack(env *Envelope) bool {
	if env.Error == nil {
		return false
	}
	switch env.Error.Type {
	case tools.TimeoutError:
		return true
	case tools.OverloadError: // a principal past its own bounds would be refused by any tool
		return env.Error.Code != tools.CodeDraining && env.Error.Code != tools.CodePrincipalRate && env.Error.Code != tools.CodePrincipalShare
	case tools.SystemError:
		return env.Error.Code != tools.CodeCancelled
	}
	return false
}

// fallback runs the fallbacks of a failed call in turn, each with the same
// request through the whole pipeline (resolution, permission, validation,
// sanitization, its own bulkhead and deadline, output checks), until one
// answers or fails in a way no other tool can help with. Fallbacks of a
// fallback follow it, depth first; a tool runs at most once per call. The
// answer is the last tool's envelope, listing those that failed before it.
// A caller's Toold-Timeout bounds the whole call, fallbacks included. A
// fallback that pauses answers a waiting envelope under its own name: the
// execution that keeps the wait resumes that tool.
func (d *Dispatcher) fallback(ctx context.Context, req *Request, primary *registry.Entry, failed *Envelope, start time.Time) *Envelope {
	var from []FallbackStep
	sub := *req
	// Each tool passes its own confirmation gate: the primary's approval or
	// token is not the fallback's. (The registry refuses fallbacks that
	// need confirmation; this holds for tools added while serving too.)
	sub.Confirmed, sub.ConfirmToken = false, ""
	sub.Charged = true // one call, whichever tool answers it
	for _, name := range fallbackOrder(d.opts.Registry.Load(), primary) {
		if ctx.Err() != nil {
			break
		}
		if req.Allowed != nil && !req.Allowed(name) {
			continue
		}
		if req.Timeout > 0 {
			if sub.Timeout = req.Timeout - time.Since(start); sub.Timeout <= 0 {
				break
			}
		}
		sub.Tool = name
		next, _ := d.executeOnce(ctx, &sub)
		if next.Status == StatusNotFound { // gone from the registry since start
			continue
		}
		from = append(from, FallbackStep{Tool: failed.Tool, Status: failed.Status, Error: failed.Error, DurationMS: failed.DurationMS})
		failed = next
		if !fallsBack(next) {
			break
		}
	}
	failed.FallbackFrom = from
	failed.StartedAt = start.UTC()
	failed.DurationMS = millis(time.Since(start))
	return failed
}

// fallbackOrder is the order fallbacks run in: each of the tool's, followed
// at once by its own (depth first), every tool once. The registry refuses
// cycles at start; the set also bounds tools added while serving.
func fallbackOrder(reg *registry.Registry, first *registry.Entry) []string {
	seen := map[string]bool{first.Spec.Name: true}
	var order []string
	var walk func(e *registry.Entry)
	walk = func(e *registry.Entry) {
		for _, name := range e.Spec.Fallback {
			if seen[name] {
				continue
			}
			seen[name] = true
			order = append(order, name)
			if next, ok := reg.Lookup(name); ok {
				walk(next)
			}
		}
	}
	walk(first)
	return order
}
