package executions

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/strictjson"
	"github.com/toold/toold/internal/tools"
)

// Joining a call that waits for approval. A client that cannot follow an
// execution (an MCP host without tasks, a model that only repeats calls)
// is told to repeat its call once a person approved it; without joins,
// each repeat would park a new execution that needs a new approval, and
// the call could never finish. So the caller's repeat of the same call —
// the same tool and arguments — joins the execution that waits: it gets
// that execution while it waits, and its outcome once it ended, once. The
// index is a key of the waits bucket per (caller, tool, arguments), kept
// for the bucket's retention; any replica reads it.

// joinEntry names the execution a call joins.
type joinEntry struct {
	ID string `json:"id"`
}

// joinKey is the waits-bucket key of the caller's call of tool with args
// (canonical: key order and spacing do not matter).
func joinKey(caller, tool string, args json.RawMessage) string {
	h := sha256.New()
	h.Write([]byte(caller))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	h.Write([]byte{0})
	h.Write(strictjson.Canonical(args))
	return "join." + hex.EncodeToString(h.Sum(nil)[:16])
}

// ParkOrJoin keeps a synchronous call that paused as Park does, unless it
// waits for a person's approval and the caller's same call already waits
// for one, or was decided since and nobody took it: then the call joins
// that execution, which is returned with joined true. An execution that no
// longer waits (approved and running, or ended) is handed over once — the
// joiner follows it to its end — and the next same call parks anew.
func (s *Service) ParkOrJoin(ctx context.Context, req *dispatch.Request, env *dispatch.Envelope) (r *Record, joined bool, err error) {
	if s.st == nil || env.Waiting == nil || env.Waiting.For != tools.WaitApproval {
		r, err = s.Park(ctx, req, env)
		return r, false, err
	}
	key := joinKey(req.Caller, req.Tool, req.Body)
	if r := s.joinable(ctx, req.Caller, key); r != nil {
		return r, true, nil
	}
	if r, err = s.Park(ctx, req, env); err != nil {
		return nil, false, err
	}
	e, _ := json.Marshal(joinEntry{ID: r.ID})
	if _, err := s.st.Waits.Put(ctx, key, e); err != nil {
		// The call waits all the same; a repeat parks another.
		s.log.Warn("executions: a call waiting for approval could not be indexed for joins", zap.String("execution_id", r.ID), zap.Error(err))
	}
	return r, false, nil
}

// joinable is the execution key names, when it still waits or is handed
// over now; nil when there is none to join.
func (s *Service) joinable(ctx context.Context, caller, key string) *Record {
	b, _, err := s.st.Waits.Get(ctx, key)
	if err != nil {
		return nil
	}
	var e joinEntry
	if json.Unmarshal(b, &e) != nil {
		return nil
	}
	r, err := s.Get(ctx, caller, e.ID)
	te, _ := tools.AsError(err)
	if te != nil && te.Kind == tools.NotFound || err == nil && r.Status != dispatch.StatusWaiting {
		// Gone, or handed over now: the next same call parks anew.
		if derr := s.st.Waits.Delete(ctx, key); derr != nil && !errors.Is(derr, state.ErrNotFound) {
			s.log.Warn("executions: a join entry could not be removed", zap.String("execution_id", e.ID), zap.Error(derr))
		}
	}
	if err != nil {
		return nil
	}
	return r
}
