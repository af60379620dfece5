package server

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"go.uber.org/zap"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/pins"
	"github.com/toold/toold/internal/tools"
)

// The changes of hosted tools that wait for a person (tool integrity,
// internal/pins): GET /tools/changes lists them, each with a readable diff
// of the old and new definitions; POST /tools/changes/{name}
// {"accept": true|false} decides on one. Both need the admin role; every
// decision is audited.

// changesView is GET /tools/changes's answer.
type changesView struct {
	Changes []pins.Change `json:"changes"`
}

// relistWait bounds how long a decision's answer waits for this
// replica's re-list of the tool's server.
const relistWait = 5 * time.Second

// listChanges is GET /tools/changes.
func (s *Server) listChanges(w http.ResponseWriter, r *http.Request) {
	v := changesView{Changes: []pins.Change{}}
	if s.opts.Pins != nil {
		var err error
		if v.Changes, err = s.opts.Pins.Changes(r.Context()); err != nil {
			s.send(w, r, s.errorReply(r, "", storeError(err)))
			return
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// decideChange is POST /tools/changes/{name}: {"accept": true|false,
// "hash": "sha256:..."}; hash, when sent, must be the change's new_hash
// (the one the admin saw).
func (s *Server) decideChange(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	info(r).tool = name
	s.withBody(w, r, "", func(body []byte) {
		var in struct {
			Accept *bool  `json:"accept"`
			Hash   string `json:"hash"`
		}
		terr := decodeStrict(body, 1, &in)
		if terr == nil && in.Accept == nil {
			terr = tools.Errorf(tools.ValidationError, "accept is missing").WithCode(tools.CodeInvalidJSON)
		}
		if terr != nil {
			s.refuse(w, r, "", dispatch.StatusRejected, terr.WithSuggestion(`send {"accept": true} to serve the tool as it is now, {"accept": false} to keep it out`))
			return
		}
		action := "accept_tool_change"
		if !*in.Accept {
			action = "refuse_tool_change"
		}
		if s.opts.Pins == nil {
			s.refuse(w, r, "", dispatch.StatusNotFound, noPendingChange(name))
			return
		}
		p, ok := s.caller(w, r)
		if !ok {
			return
		}
		rec, err := s.opts.Pins.Decide(r.Context(), name, *in.Accept, in.Hash, p.Name)
		switch {
		case errors.Is(err, pins.ErrNoChange):
			s.refuse(w, r, "", dispatch.StatusNotFound, noPendingChange(name))
			return
		case errors.Is(err, pins.ErrStale):
			s.refuse(w, r, "", dispatch.StatusRejected, tools.Errorf(tools.ValidationError, "the tool %q changed again since the change was shown", name).
				WithCode(tools.CodeToolDefinitionChanged).WithSuggestion("GET /tools/changes shows the change as it is now"))
			return
		case err != nil:
			s.send(w, r, s.errorReply(r, "", storeError(err)))
			return
		}
		hash := rec.Hash
		if rec.Pending != nil {
			hash = rec.Pending.Hash
		}
		s.auditAction(r, action, name+" "+hash)
		s.log.Info("a hosted tool's change was decided", zap.String("tool", name), zap.String("action", action), zap.String("hash", hash))
		if s.opts.Relist != nil {
			// Every replica re-lists when it sees the decision (the pins
			// watch); this one does before it answers, so a listing right
			// after the answer shows the decision.
			ctx, cancel := context.WithTimeout(r.Context(), relistWait)
			if err := s.opts.Relist(ctx, name); err != nil {
				s.log.Info("the decided tool's server did not re-list before the answer; it serves the decision when it does",
					zap.String("tool", name), zap.Error(err))
			}
			cancel()
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": name, "accepted": *in.Accept, "hash": hash})
	})
}

func noPendingChange(name string) *tools.Error {
	return tools.Errorf(tools.NotFound, "no change of the tool %q waits for a decision", name).WithCode(tools.CodeNoPendingChange).
		WithSuggestion("GET /tools/changes lists the changes that wait")
}

// storeError is a store failure as the caller is told it.
func storeError(err error) error {
	return tools.Errorf(tools.OverloadError, "the state store could not be read or written").WithCode(tools.CodeStoreUnavailable).
		WithRetryAfter(time.Second).Wrap(err)
}
