package server

import (
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/catalog"
)

// maxQueryBytes bounds a search query: a description of a task, not a
// document.
const maxQueryBytes = 1000

// searchTools is GET /tools/search?q=…&limit=N: the tools of the caller's
// view (narrowed by ?toolset=) that best match q, best first, rendered in
// ?format= (native, openai, openai-responses, anthropic, mcp). The search
// tool itself is never a match.
func (s *Server) searchTools(w http.ResponseWriter, r *http.Request) {
	p, ok := s.chargedCaller(w, r)
	if !ok {
		return
	}
	sr, terr := s.parseSearch(r)
	if terr != nil {
		s.refuse(w, r, "", dispatch.StatusRejected, terr)
		return
	}
	v := s.view(p, r, sr.set)
	hits := s.opts.Dispatcher.Registry().Search(sr.query, sr.limit, func(e *registry.Entry) bool {
		return e.Spec.Name != catalog.Name && v.Shows(e)
	})
	body, err := registry.RenderSearch(sr.format, sr.query, hits, sr.callID)
	if err != nil {
		s.refuse(w, r, "", dispatch.StatusError, tools.Errorf(tools.SystemError, "rendering the search failed").Wrap(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// searchRequest is a search as GET /tools/search asks it.
type searchRequest struct {
	query, callID string
	limit         int
	format        registry.Format
	set           *registry.Toolset
}

// parseSearch reads the search's parameters, refusing the first that is
// wrong.
func (s *Server) parseSearch(r *http.Request) (sr searchRequest, terr *tools.Error) {
	q := r.URL.Query()
	if sr.query, terr = parseQuery(q.Get("q")); terr != nil {
		return sr, terr
	}
	if sr.limit, terr = parseSearchLimit(q.Get("limit")); terr != nil {
		return sr, terr
	}
	var err error
	if sr.format, err = registry.ParseSearchFormat(q.Get("format")); err != nil {
		return sr, badParam("format", "is not a search rendering", "use native, openai, openai-responses, anthropic or mcp")
	}
	if sr.callID, terr = parseCallID(q.Get("call_id")); terr != nil {
		return sr, terr
	}
	sr.set, terr = s.toolset(r)
	return sr, terr
}

// parseQuery reads ?q=: 1 to 1000 bytes of UTF-8.
func parseQuery(v string) (string, *tools.Error) {
	switch {
	case v == "":
		return "", badParam("q", "is missing", "say what the tool should do, e.g. ?q=list+open+pull+requests")
	case len(v) > maxQueryBytes:
		return "", badParam("q", "is longer than "+strconv.Itoa(maxQueryBytes)+" bytes", "describe the task in a few words")
	case !utf8.ValidString(v):
		return "", badParam("q", "is not valid UTF-8", "send the query as UTF-8, percent-encoded")
	}
	return v, nil
}

// parseSearchLimit reads ?limit= of a search: 1 to 50, default 5.
func parseSearchLimit(v string) (int, *tools.Error) {
	if v == "" {
		return catalog.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > catalog.MaxLimit || len(v) > 2 {
		return 0, badParam("limit", "must be a whole number from 1 to 50", "use, for example, ?limit=5")
	}
	return n, nil
}

// parseCallID reads ?call_id=: the id of the model's search call, which
// the anthropic and openai-responses renderings answer (1-128 of letters,
// digits, _ and -).
func parseCallID(v string) (string, *tools.Error) {
	if v == "" {
		return "", nil
	}
	if len(v) > 128 || !idChars(v) {
		return "", badParam("call_id", "must be 1-128 letters, digits, _ or -", "pass the id of the model's tool call, e.g. toolu_01A09q90qw90lq917835lq9")
	}
	return v, nil
}

func idChars(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// toolset is the toolset ?toolset= names, or nil when none is named; an
// unknown name is a validation error listing the toolsets.
func (s *Server) toolset(r *http.Request) (*registry.Toolset, *tools.Error) {
	name := r.URL.Query().Get("toolset")
	if name == "" {
		return nil, nil
	}
	if t, ok := s.opts.Toolsets[name]; ok {
		return t, nil
	}
	fix := "this toold has no toolsets (configure toolsets.<name>)"
	if len(s.opts.Toolsets) > 0 {
		fix = "use one of: " + strings.Join(s.opts.Toolsets.Names(), ", ")
	}
	return nil, badParam("toolset", "names no configured toolset", fix).WithCode(tools.CodeUnknownToolset)
}

// toolsetMCP serves /mcp/<toolset>: the toolset's own MCP server, behind
// the same checks as /mcp; an unknown toolset is a JSON-RPC error with 404.
func (s *Server) toolsetMCP(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "toolset")
	h, ok := s.opts.MCPToolsets[name]
	if !ok {
		msg := "no toolset is named " + strconv.Quote(name)
		if names := s.opts.Toolsets.Names(); len(names) > 0 {
			msg += "; toolsets: " + strings.Join(names, ", ")
		}
		mcpserver.WriteError(w, http.StatusNotFound, s.opts.Dispatcher.RedactText(msg))
		return
	}
	h.ServeHTTP(w, r)
}
