package server

import (
	"context"
	"net/http"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
)

// ReloadFunc reloads the configuration for who (caller's name, the
// request's id): what it did, or why it refused.
type ReloadFunc func(ctx context.Context, who *auth.Identity, caller, requestID string) (any, *tools.Error)

// reload serves POST /admin/reload: the configuration file is read again
// and applied, or refused (invalid_config, restart_needed) while the old
// one keeps serving. The body, if any, is not read.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reload == nil {
		s.refuse(w, r, "", dispatch.StatusNotFound, tools.Errorf(tools.NotFound, "this toold cannot reload its configuration").
			WithCode(tools.CodeNoRoute).WithSuggestion("restart toold to apply a new configuration"))
		return
	}
	p, ok := s.caller(w, r)
	if !ok {
		return
	}
	res, terr := s.opts.Reload(r.Context(), p.Who(), p.Name, info(r).id)
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
