package executions

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// Idempotency keys (the IETF httpapi Idempotency-Key draft) and the
// redundancy check of a turn share one mechanism: a claim in the
// idempotency bucket, created atomically by the first request and holding
// its answer once it has one. A second request with the same claim key
// replays the answer; while the first is still running, the second waits
// for it (up to IdempotencyWait) and is then refused with 409. A claim
// carries a lease (the call's timeout and a margin): the claim of a replica
// that died mid-call can be taken over once its lease has passed, instead
// of blocking the key until it expires.

// Answer is a stored HTTP answer.
type Answer struct {
	Status int `json:"status"`
	// Location is the Location header of an async answer.
	Location string          `json:"location,omitempty"`
	Body     json.RawMessage `json:"body"`
}

type claimValue struct {
	Fingerprint string    `json:"fingerprint"`
	Done        bool      `json:"done"`
	LeaseUntil  time.Time `json:"lease_until"`
	RequestID   string    `json:"request_id,omitempty"`
	Answer      *Answer   `json:"answer,omitempty"`
}

// Claim is this request's right to run; Finish or Abandon it.
type Claim struct {
	key   string
	rev   uint64
	value claimValue
	// Lost names the earlier request whose claim this one took over: its
	// replica stopped before it answered (past its lease), so whether it
	// took effect is unknown. A tool that is not idempotent must not run
	// again under the key: answer that, and Finish with the answer.
	Lost string
}

// Fingerprint identifies a request's content: what it does (mode, tool)
// and its arguments in canonical form, so key order and spacing do not
// make two equal requests differ.
func Fingerprint(mode, tool string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(mode + "\x00" + tool + "\x00"))
	h.Write(strictjson.Canonical(body))
	return hex.EncodeToString(h.Sum(nil))
}

func claimKey(scope, key string) string {
	sum := sha256.Sum256([]byte(scope + "\x00" + key))
	return hex.EncodeToString(sum[:])
}

// IdempotencyScope keeps one caller's keys apart from another's.
func IdempotencyScope(caller string) string { return "key\x00" + caller }

// turnScope keeps one caller's turn apart from its other turns.
func turnScope(caller, turn string) string { return "turn\x00" + caller + "\x00" + turn }

// Begin claims (scope, key) for a request with fingerprint fp. It returns
// a Claim when this request should run, the stored Answer when an earlier
// request already answered, or an error: 422 when the key was used for
// other content, 409 when the first request is still running after the
// wait, 503/507 when the store fails.
func (s *Service) Begin(ctx context.Context, scope, key, fp, requestID string, lease time.Duration) (*Claim, *Answer, error) {
	if s.st == nil {
		return nil, nil, errNoStore
	}
	ck := claimKey(scope, key)
	deadline := time.Now().Add(max(s.opts.IdempotencyWait, 0))
	for {
		v := claimValue{Fingerprint: fp, LeaseUntil: time.Now().Add(lease).UTC(), RequestID: requestID}
		rev, err := s.st.Idempotency.Create(ctx, ck, mustJSON(v))
		if err == nil {
			s.m.replays.WithLabelValues("first").Inc()
			return &Claim{key: ck, rev: rev, value: v}, nil, nil
		}
		if !errors.Is(err, state.ErrConflict) {
			return nil, nil, StoreError(err)
		}
		b, rev, err := s.st.Idempotency.Get(ctx, ck)
		if errors.Is(err, state.ErrNotFound) {
			continue // expired or abandoned meanwhile
		}
		if err != nil {
			return nil, nil, StoreError(err)
		}
		var cur claimValue
		if json.Unmarshal(b, &cur) != nil {
			return nil, nil, StoreError(errors.New("unreadable claim"))
		}
		switch {
		case cur.Fingerprint != fp:
			s.m.replays.WithLabelValues("mismatch").Inc()
			return nil, nil, tools.Errorf(tools.ValidationError, "this Idempotency-Key was used for a different request (another tool, mode or arguments)").
				WithCode(tools.CodeIdempotencyKeyReused).WithSuggestion("use a new Idempotency-Key for a new request; reuse a key only to retry the same one")
		case cur.Done:
			s.m.replays.WithLabelValues("replayed").Inc()
			return nil, cur.Answer, nil
		case time.Now().After(cur.LeaseUntil):
			if nrev, err := s.st.Idempotency.Update(ctx, ck, mustJSON(v), rev); err == nil {
				s.m.replays.WithLabelValues("lost").Inc()
				return &Claim{key: ck, rev: nrev, value: v, Lost: cmp.Or(cur.RequestID, "an earlier request")}, nil, nil
			}
			continue // someone else took it over: look again
		}
		if !s.awaitClaim(ctx, ck, min(time.Until(deadline), time.Until(cur.LeaseUntil))) {
			s.m.replays.WithLabelValues("in_flight").Inc()
			e := tools.Errorf(tools.OverloadError, "a request with this Idempotency-Key (request %s) is still running", cur.RequestID).
				WithCode(tools.CodeIdempotencyInFlight).WithSuggestion("retry with the same key in a moment to get its answer")
			e.RetryAfter = time.Second
			return nil, nil, e
		}
	}
}

// awaitClaim waits until the claim changes (answered, abandoned) or d
// passes; it reports whether it changed.
func (s *Service) awaitClaim(ctx context.Context, ck string, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	updates, err := s.st.Idempotency.Watch(ctx, ck)
	if err != nil {
		return false
	}
	first := true
	for e := range updates {
		if first {
			first = false
			var cur claimValue
			if json.Unmarshal(e.Value, &cur) == nil && !cur.Done {
				continue // the value we already saw
			}
		}
		return true
	}
	// the watch ended: the deadline passed, or the key was deleted
	_, _, err = s.st.Idempotency.Get(context.WithoutCancel(ctx), ck)
	return errors.Is(err, state.ErrNotFound)
}

// Finish stores the answer under the claim, for replays, riding out the
// store's absence until the claim's lease ends: an answer not stored
// leaves the key claimed, and a retry after the lease is told the first
// request's outcome is unknown rather than its answer.
func (s *Service) Finish(ctx context.Context, c *Claim, a *Answer) error {
	c.value.Done, c.value.Answer = true, a
	value := mustJSON(c.value)
	err := s.retryStore(context.WithoutCancel(ctx), max(time.Until(c.value.LeaseUntil), time.Second), func(ctx context.Context) error {
		_, err := s.st.Idempotency.Update(ctx, c.key, value, c.rev)
		return err
	})
	if err != nil {
		return StoreError(err)
	}
	return nil
}

// Interrupted is the answer to a request under an Idempotency-Key whose
// earlier request was lost with its replica (Claim.Lost), for a tool that
// must not run twice.
func Interrupted(lost string) *tools.Error {
	return tools.Errorf(tools.SystemError, "the request %s with this Idempotency-Key was running on a replica that stopped before it answered; "+
		"it may or may not have taken effect, so it was not run again", lost).WithCode(tools.CodeInterrupted).
		WithSuggestion("check whether its effect happened; to run it again, send it with a new Idempotency-Key")
}

// Abandon gives the claim up: the request was refused before it did
// anything (overload, draining), so a retry must really run.
func (s *Service) Abandon(ctx context.Context, c *Claim) {
	_ = s.st.Idempotency.Delete(context.WithoutCancel(ctx), c.key)
}

// BeginTurn applies the redundancy check of a turn (Toold-Turn) to a
// call of tool with body. A read-only tool's repeated call replays the
// first one's answer (the server marks it redundant); a repeated call of
// any other tool is refused with a user_error, since running it again
// would do it again. The first call gets a Claim to Finish.
func (s *Service) BeginTurn(ctx context.Context, caller, turn, tool string, body []byte, readOnly bool, requestID string, lease time.Duration) (*Claim, *Answer, error) {
	fp := Fingerprint("turn", tool, body)
	scope := turnScope(caller, turn)
	if readOnly {
		c, a, err := s.Begin(ctx, scope, fp, fp, requestID, lease)
		if a != nil {
			s.m.replays.WithLabelValues("redundant").Inc()
		}
		return c, a, err
	}
	if s.st == nil {
		return nil, nil, errNoStore
	}
	ck := claimKey(scope, fp)
	v := claimValue{Fingerprint: fp, LeaseUntil: time.Now().Add(lease).UTC(), RequestID: requestID}
	rev, err := s.st.Idempotency.Create(ctx, ck, mustJSON(v))
	switch {
	case err == nil:
		return &Claim{key: ck, rev: rev, value: v}, nil, nil
	case !errors.Is(err, state.ErrConflict):
		return nil, nil, StoreError(err)
	}
	first := "an earlier request"
	if b, _, err := s.st.Idempotency.Get(ctx, ck); err == nil {
		var cur claimValue
		if json.Unmarshal(b, &cur) == nil && cur.RequestID != "" {
			first = "request " + cur.RequestID
		}
	}
	s.m.replays.WithLabelValues("redundant").Inc()
	return nil, nil, tools.NewUserError("this exact call of %q was already made in this turn (%s); it was not run again, because %q changes things", tool, first, tool).
		WithCode(tools.CodeRedundantCall).WithSuggestion("use the result of the earlier call; if it really must run twice, start a new turn (another Toold-Turn)")
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
