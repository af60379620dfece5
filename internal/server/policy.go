package server

import (
	"net/http"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/policy"
	"github.com/toold/toold/internal/registry"
)

// ViaHeader names the way in of a REST request when it is the console's
// page (its value "console"): what policies see as context.via. It is the
// caller's claim, as the console is a client of the API like any other;
// anything else is a REST call.
const ViaHeader = "Toold-Via"

// via is the way a REST request came in.
func via(r *http.Request) string {
	if r.Header.Get(ViaHeader) == policy.ViaConsole {
		return policy.ViaConsole
	}
	return policy.ViaREST
}

// view is the caller's view of the catalog (registry.View), narrowed to
// set when one is given: its key's or token's tools, that the policy
// lets it list.
func (s *Server) view(p *auth.Principal, r *http.Request, set *registry.Toolset) *registry.View {
	v := s.opts.Dispatcher.View(p.Who(), p.Allows, via(r))
	v.Set = set
	return v
}
