// Package events is toold's activity stream and audit log. Both are written
// off the hot path: a dispatch observer (Recorder) copies what it needs
// from each call into a buffer and returns; a background flusher publishes
// the buffer in batches to the state store's streams — one message per
// batch — so a synchronous call never waits on the store.
//
// Events are JSON objects; one message of the TOOLD_EVENTS stream holds one
// or more, one per line. An event's id is "<stream sequence>.<line>", which
// is what SSE clients send back as Last-Event-ID to resume.
//
// Audit records form one hash chain across replicas, each append signed
// with an ed25519 key the store does not hold (audit.go, auditkey.go);
// the chain's head is published outside the store as checkpoints
// (checkpoint.go), and Verify checks a log against keys and checkpoints
// (auditread.go).
package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toold/toold/internal/auth"
)

// Types of events.
const (
	TypeStart   = "start"   // a tool started running
	TypeEnd     = "end"     // a call ended with success
	TypeError   = "error"   // a call ended otherwise
	TypeOutput  = "output"  // streamed output of an async execution
	TypePending = "pending" // an async execution was accepted
	TypeWaiting = "waiting" // an execution paused: for a subtask, an input or an approval
	TypeResumed = "resumed" // a waiting execution got its answer, or its approval
)

// Subjects of the events stream.
const (
	ActivitySubject  = "toold.events.activity"
	executionsPrefix = "toold.events.exec."
)

// ExecutionSubject is the subject of one execution's events.
func ExecutionSubject(id string) string { return executionsPrefix + id }

// Event is one entry of the activity stream or of an execution's events.
// It never carries arguments or results: outcomes, names and timings, and
// for output the chunk the streaming redactor already passed.
type Event struct {
	ID        string    `json:"id,omitempty"`
	Type      string    `json:"type"`
	Time      time.Time `json:"time"`
	Replica   string    `json:"replica,omitempty"`
	RequestID string    `json:"request_id,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Caller    string    `json:"caller,omitempty"`
	// Principal is a token's subject, issuer and acting client, beside
	// Caller's name (without the token's tool narrowing).
	Principal   *auth.Identity `json:"principal,omitempty"`
	ExecutionID string         `json:"execution_id,omitempty"`
	Status      string         `json:"status,omitempty"`
	ErrorType   string         `json:"error_type,omitempty"`
	ErrorCode   string         `json:"error_code,omitempty"`
	DurationMS  float64        `json:"duration_ms,omitempty"`
	// Started and Coalesced are on the end (or error) event of a call that
	// started and ended within one flush of the activity stream: it has
	// no start event of its own, and Started is when it started.
	Started   time.Time `json:"started,omitzero"`
	Coalesced bool      `json:"coalesced,omitempty"`
	Stream    string    `json:"stream,omitempty"`
	Chunk     string    `json:"chunk,omitempty"`
	// Envelope is the final envelope, on an execution's end or error
	// event (not in the activity stream).
	Envelope json.RawMessage `json:"envelope,omitempty"`
}

// ID is a position in a stream: a message's sequence and a line in it.
type ID struct {
	Seq  uint64
	Line int
}

func (id ID) String() string { return strconv.FormatUint(id.Seq, 10) + "." + strconv.Itoa(id.Line) }

// IsZero reports whether id is the zero position (before everything).
func (id ID) IsZero() bool { return id.Seq == 0 }

// After reports whether id comes after o.
func (id ID) After(o ID) bool { return id.Seq > o.Seq || id.Seq == o.Seq && id.Line > o.Line }

// MaxLines bounds the lines of one message, and so an ID's line part.
const MaxLines = 4096

// ParseID reads "<seq>.<line>" (or "<seq>", meaning its line 0) as sent in
// Last-Event-ID or a cursor. Untrusted input: it is bounded and strict.
func ParseID(s string) (ID, error) {
	if s == "" {
		return ID{}, nil
	}
	if len(s) > 32 {
		return ID{}, fmt.Errorf("%q is too long for an event id", s[:32]+"…")
	}
	seqText, lineText, hasLine := strings.Cut(s, ".")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if err != nil || seq == 0 || seqText[0] == '+' || seqText[0] == '0' {
		return ID{}, fmt.Errorf("%q is not an event id (<sequence>.<line>, as the id: field of an event)", s)
	}
	id := ID{Seq: seq}
	if hasLine {
		// Unsigned: Atoi took "-0" for line 0, so "1.-0" named the
		// event 1.0 (FuzzParseID).
		n, err := strconv.ParseUint(lineText, 10, 64)
		if err != nil || n >= MaxLines || len(lineText) > 1 && lineText[0] == '0' {
			return ID{}, fmt.Errorf("%q is not an event id (<sequence>.<line>, as the id: field of an event)", s)
		}
		id.Line = int(n)
	}
	return id, nil
}
