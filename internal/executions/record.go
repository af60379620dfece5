package executions

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tracing"
)

// Record is an execution as the store holds it: a key of the executions
// bucket, "<owner>.<id>". A waiting or queued execution is this record and
// a work-queue message, never a goroutine.
type Record struct {
	ID     string `json:"id"`
	Caller string `json:"caller"`
	// Principal is who the execution is for, beyond the caller's name:
	// a token's subject, issuer and acting client, and its claims'
	// narrowing of its tools, which every later step is held to.
	Principal *auth.Identity `json:"principal,omitempty"`
	// Kind is "call" (one tool) or "batch".
	Kind string `json:"kind"`
	// Tool is the tool whose step runs next: the one called, or the
	// fallback that paused in its place.
	Tool string `json:"tool,omitempty"`
	// CalledAs is the tool the caller called, when a fallback paused in
	// its place (Tool is then the fallback); see Called.
	CalledAs string `json:"called_as,omitempty"`
	// Arguments are kept only until the execution ends (a replica that
	// takes it over needs them); the final record drops them.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// AuditAfter marks a final record written before the end's audit
	// record was in the store (its replica's audit lease covered it), and
	// ArgsSHA256 is then the arguments' hash as the audit log holds it:
	// what a recovery of that record needs (recovery.go).
	AuditAfter bool          `json:"audit_after,omitempty"`
	ArgsSHA256 string        `json:"args_sha256,omitempty"`
	Batch      *BatchRequest `json:"batch,omitempty"`
	TimeoutMS  int64         `json:"timeout_ms,omitempty"`
	// ConfirmToken answers a confirmation challenge, for the run.
	ConfirmToken string          `json:"confirm_token,omitempty"`
	RequestID    string          `json:"request_id"`
	Status       dispatch.Status `json:"status"`
	// Envelope is the final envelope once Status is final.
	Envelope json.RawMessage `json:"envelope,omitempty"`
	// Quiet marks an execution that ended, without output, before its id
	// was given out (a quick call kept with one write, inline.go): nobody
	// could follow it, so none of its own events were published, and its
	// event stream is told from this record (its acceptance, its end).
	Quiet bool `json:"quiet,omitempty"`
	// Replica runs (or last ran) it; Attempt counts the runs started.
	Replica string `json:"replica,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// CancelRequested is set by DELETE; the running replica stops it.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// Step counts the execution's passes through the pipeline: a work
	// message of another step is stale (the pass it was for is over).
	Step int `json:"step"`
	// Wait is what a waiting execution waits for.
	Wait *Wait `json:"wait,omitempty"`
	// Resume carries a resumed execution's answer to the replica that
	// runs its next step.
	Resume *tools.Resumption `json:"resume,omitempty"`
	// Approval is a person's decision on the call.
	Approval *Approval `json:"approval,omitempty"`
	// Confirmed is set once the call passed the confirmation gate (a
	// token, an approval): its later steps do not pass it again.
	Confirmed bool `json:"confirmed,omitempty"`
	// Lineage is where a subtask stands among subtasks (delegate).
	Lineage *tools.Lineage `json:"lineage,omitempty"`
	// Trace is the span context of the request that made the execution
	// (W3C traceparent; tracestate is never carried): every step the replicas run joins
	// that caller's trace. Nil with tracing off.
	Trace     tracing.Carrier `json:"trace,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	StartedAt time.Time       `json:"started_at,omitzero"`
	UpdatedAt time.Time       `json:"updated_at"`

	// env is Envelope as the replica that wrote the record made it (never
	// stored): View answers with it rather than decode Envelope again, for
	// the caller this replica answers (a Prefer: wait, a local GET ?wait).
	env *dispatch.Envelope
}

// Called is the tool the caller called, which a client repeating the call
// names.
func (r *Record) Called() string { return cmp.Or(r.CalledAs, r.Tool) }

// Wait is what a waiting execution waits for. State is the tool's own and
// never shown; the rest is.
type Wait struct {
	For     string          `json:"for"`
	Request json.RawMessage `json:"request"`
	// Review is an approval's request as approvers are shown it
	// (dispatch.Waiting.Review): listed by GET /approvals, never in the
	// caller's envelope or the activity stream.
	Review    json.RawMessage `json:"review,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	Since     time.Time       `json:"since"`
	ExpiresAt time.Time       `json:"expires_at"`
	// Schedule is the timers stream sequence of the wait's timer, a
	// message the server publishes when the wait expires. Whoever ends
	// the wait first deletes it.
	Schedule uint64 `json:"schedule,omitempty"`
	// Timer is how waits were timed before: the work stream sequence of
	// the message held back until the wait expired, which took one of
	// the work consumer's MaxAckPending slots while it waited. Records of
	// waits an older toold began still carry it; it is deleted like a
	// schedule when the wait ends early.
	Timer uint64 `json:"timer,omitempty"`
}

// Approval is a person's decision on a call that waited for one.
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	// Approver is who decided, beyond By's name (a token's subject and
	// issuer, the client they used).
	Approver *auth.Identity `json:"approver,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	At       time.Time      `json:"at"`
}

// key is the record's key in the executions bucket.
func (r *Record) key() string { return recordKey(r.Caller, r.ID) }

// recordKey is a record's key: under its caller's prefix
// (state.OwnerPrefix), a key sees only its own.
func recordKey(caller, id string) string { return state.OwnerPrefix(caller) + "." + id }

// newID makes an execution id: 12 hex digits of Unix milliseconds and 12
// random ones, so ids sort by creation time.
func newID(now time.Time) string {
	var b [12]byte
	binary.BigEndian.PutUint64(b[:8], uint64(now.UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}

// ValidID reports whether s has the shape of an execution id; anything
// else is answered 404 without a store lookup.
func ValidID(s string) bool {
	if len(s) != 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// View is the envelope a client sees for the record now: the final
// envelope once there is one, otherwise one that says how far it got.
func (r *Record) View() *dispatch.Envelope {
	if e := r.env; e != nil && e.Error == nil && len(e.FallbackFrom) == 0 && e.Waiting == nil {
		// What decoding Envelope gives: its fields, none of those it does
		// not carry. (One with an error is decoded: answering redacts the
		// error in place, and another waiter may hold the same one.)
		v := *e
		v.ExecutionID, v.Status, v.Success = r.ID, r.Status, r.Status == dispatch.StatusSuccess
		v.TraceSampled, v.Pause = false, nil
		return &v
	}
	if len(r.Envelope) > 0 {
		var env dispatch.Envelope
		if err := json.Unmarshal(r.Envelope, &env); err == nil {
			env.ExecutionID, env.Status, env.Success = r.ID, r.Status, r.Status == dispatch.StatusSuccess
			return &env
		}
	}
	started := r.CreatedAt
	if !r.StartedAt.IsZero() {
		started = r.StartedAt
	}
	env := &dispatch.Envelope{RequestID: r.RequestID, Tool: r.Tool, Status: r.Status, StartedAt: started,
		DurationMS: float64(time.Since(started).Microseconds()) / 1000, ExecutionID: r.ID, Sanitized: sanitize.Report{}}
	if w := r.Wait; w != nil && r.Status == dispatch.StatusWaiting {
		env.Waiting = &dispatch.Waiting{For: w.For, Request: w.Request, ExpiresAt: w.ExpiresAt, Resume: r.resumePath()}
	}
	return env
}

// resumePath is where a waiting execution's answer goes: nowhere the
// caller is told of for an approval. The approver's route is the
// person's; the caller needs to know that it waits, for how long, and
// where to follow it (the execution), not a ready-made way to approve
// itself.
func (r *Record) resumePath() string {
	if r.Wait != nil && r.Wait.For == tools.WaitApproval {
		return ""
	}
	return r.Location() + "/resume"
}

// Location is where the execution is read.
func (r *Record) Location() string { return "/executions/" + r.ID }

func decodeRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("executions: a stored record is not readable: %w", err)
	}
	return &r, nil
}
