package dispatch

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/toold/toold/internal/tools"
)

// single has one slot and no queue: a second entry into its bulkhead is
// refused at once, which shows whether a call entered it twice.
type single struct{}

func (single) Spec() tools.Spec {
	return tools.Spec{Name: "single", Description: "One at a time.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
		Limits:     tools.Limits{Timeout: 5 * time.Second, Target: time.Millisecond, Max: 2 * time.Millisecond, MaxInFlight: 1, MaxQueue: tools.NoQueue}}
}
func (single) Execute(context.Context, *tools.Call) (any, error) { return "ran", nil }

// TestAdmitThenExecute: Admit takes the slot before the body exists;
// Execute runs the call in it (not entering the bulkhead again) and frees
// it; a ticket not taken is given back by Release; Admit refuses what
// cannot run, before any body, as Execute would.
func TestAdmitThenExecute(t *testing.T) {
	d := newDispatcher(t, nil, single{}, noop{})
	ctx := context.Background()

	start := time.Now()
	tk, env := d.Admit(ctx, &Request{Tool: "single", RequestID: "a", Timeout: time.Second})
	if env != nil {
		t.Fatalf("admit: %+v", env.Error)
	}
	if dl := tk.Deadline(); dl.Before(start.Add(time.Second)) || dl.After(time.Now().Add(time.Second)) {
		t.Errorf("deadline %v: want the shortened timeout from admission", dl.Sub(start))
	}
	if env := d.Execute(ctx, &Request{Tool: "single", RequestID: "b"}); env.Error == nil || env.Error.Code != "queue_full" {
		t.Fatalf("while the ticket holds the one slot, another call: %+v", env)
	}
	env = d.Execute(ctx, &Request{Tool: "single", RequestID: "a", Body: []byte(`{"x":"y"}`), Ticket: tk})
	if env.Status != StatusSuccess {
		t.Fatalf("execute with the ticket: %s %+v", env.Status, env.Error)
	}
	tk.Release() // taken: nothing to give back
	waitFree(t, d)

	// A ticket whose body never came is released.
	tk, _ = d.Admit(ctx, &Request{Tool: "single", RequestID: "c"})
	tk.Release()
	tk.Release()
	waitFree(t, d)

	// A refused body (validation) frees the ticket's slot too.
	tk, _ = d.Admit(ctx, &Request{Tool: "single", RequestID: "d"})
	if env := d.Execute(ctx, &Request{Tool: "single", Body: []byte(`{"x":1}`), Ticket: tk}); env.Status != StatusRejected {
		t.Fatalf("a bad body: %s", env.Status)
	}
	waitFree(t, d)

	// A ticket is the call's of its tool only: another tool's call enters
	// its own bulkhead, and the ticket stays to be released.
	tk, _ = d.Admit(ctx, &Request{Tool: "single", RequestID: "e"})
	if env := d.Execute(ctx, &Request{Tool: "noop", Ticket: tk}); env.Status != StatusSuccess {
		t.Fatalf("another tool with the ticket: %s", env.Status)
	}
	if env := d.Execute(ctx, &Request{Tool: "single"}); env.Error == nil || env.Error.Code != "queue_full" {
		t.Fatalf("the ticket was spent on another tool: %+v", env)
	}
	tk.Release()
	waitFree(t, d)

	for _, tc := range []struct {
		req  *Request
		want Status
	}{
		{&Request{Tool: "nope"}, StatusNotFound},
		{&Request{Tool: "single", Allowed: func(string) bool { return false }}, StatusRejected},
	} {
		if tk, env := d.Admit(ctx, tc.req); tk != nil || env == nil || env.Status != tc.want {
			t.Errorf("admit %s: ticket %v, envelope %+v", tc.req.Tool, tk, env)
		}
	}
}

// waitFree waits until single's slot is free again.
func waitFree(t *testing.T, d *Dispatcher) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tk, env := d.Admit(context.Background(), &Request{Tool: "single"})
		if env == nil {
			tk.Release()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the slot was not freed: %+v", env.Error)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFreeSlotIsGivenBack: a call that finds a slot free takes it before
// it is prepared (see Dispatcher.run), as a ticket's call holds one; a
// refusal while preparing, a panic there, or a caller gone before the tool
// runs gives the slot back at once, before Execute returns, either way.
func TestFreeSlotIsGivenBack(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		panic  bool
		cancel bool // the caller has gone
		want   Status
	}{
		{name: "valid", body: `{"x":"y"}`, want: StatusSuccess},
		{name: "caller gone", body: `{"x":"y"}`, cancel: true, want: StatusError},
		{name: "invalid arguments", body: `{"x":1}`, want: StatusRejected},
		{name: "not JSON", body: `{"x":`, want: StatusRejected},
		{name: "sanitizer panics", body: `{"x":"y"}`, panic: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDispatcher(t, nil, single{})
			if tt.panic {
				d.Swap(Stages{Sanitizer: panickySanitizer{d.opts.Sanitizer}})
			}
			for _, ticket := range []bool{false, true} { // the slot taken by Execute, or by Admit first
				func() {
					defer func() {
						if p := recover(); (p != nil) != tt.panic {
							t.Fatalf("ticket %v: panic %v, want one: %v", ticket, p, tt.panic)
						}
					}()
					req := &Request{Tool: "single", Body: []byte(tt.body)}
					if ticket {
						tk, env := d.Admit(context.Background(), &Request{Tool: "single"})
						if env != nil {
							t.Fatalf("admit: %+v", env.Error)
						}
						req.Ticket = tk
						defer tk.Release() // as a transport does: nothing once Execute took it
					}
					ctx, cancel := context.WithCancel(context.Background())
					if tt.cancel {
						cancel()
					}
					defer cancel()
					env := d.Execute(ctx, req)
					if env.Status != tt.want {
						t.Fatalf("ticket %v: status %s, want %s (%+v)", ticket, env.Status, tt.want, env.Error)
					}
					if tt.cancel && (env.Error == nil || env.Error.Code != "cancelled") {
						t.Fatalf("ticket %v: a call whose caller left: %+v", ticket, env.Error)
					}
				}()
				// At once, not eventually: the one slot must be free now.
				tk, env := d.Admit(context.Background(), &Request{Tool: "single"})
				if env != nil {
					t.Fatalf("ticket %v: the slot was not given back: %+v", ticket, env.Error)
				}
				tk.Release()
			}
		})
	}
}
