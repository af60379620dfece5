package server

import (
	"bytes"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toold/toold/internal/console"
)

// GET / is where a person who typed toold's address lands: a browser
// (Accept: text/html) is sent to the console, anything else gets a small
// JSON index saying what is here — the routes (read from the contract
// this toold serves, so the index cannot drift from it), how callers
// authenticate, and where the documentation is.

// Index is GET /'s answer to an API client.
type Index struct {
	Service string `json:"service"`
	Version string `json:"version,omitempty"`
	// Console, OpenAPI and MCP are paths on this server (MCP absent when
	// toold serves no MCP over HTTP).
	Console string       `json:"console"`
	OpenAPI string       `json:"openapi"`
	MCP     string       `json:"mcp,omitempty"`
	Auth    IndexAuth    `json:"auth"`
	Routes  []IndexRoute `json:"routes"`
	// Docs are the documentation pages, for this version.
	Docs map[string]string `json:"docs"`
}

// IndexAuth says how callers authenticate here.
type IndexAuth struct {
	// Keys: API keys are accepted (Authorization: Bearer <key>).
	Keys bool `json:"keys"`
	// Tokens: access tokens of trusted issuers are accepted.
	Tokens bool `json:"tokens"`
	// SignIn: people may sign in to the console with an issuer.
	SignIn bool `json:"sign_in"`
	// None: neither keys nor tokens are configured: toold serves loopback
	// only, and every local caller has every role.
	None bool `json:"none"`
}

// IndexRoute is one operation of the contract.
type IndexRoute struct {
	Method  string `json:"method"`
	Path    string `json:"path"`
	Summary string `json:"summary"`
}

// docsRepo is where the documentation of each version is read.
const docsRepo = "https://github.com/toold/toold/blob/"

// indexDocs are the pages the index links, by name.
var indexDocs = map[string]string{
	"readme": "README.md", "api": "docs/api.md", "configuration": "docs/configuration.md",
	"identity": "docs/identity.md", "mcp": "docs/mcp.md", "console": "docs/console.md",
	"executions": "docs/executions.md", "security": "docs/security.md",
}

// release is a version named by a release tag, whose docs are the tag's.
var release = regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// indexHandler serves GET /, its JSON built once from the options.
func (s *Server) indexHandler() http.HandlerFunc {
	idx := Index{Service: "toold", Version: s.opts.Version, Console: console.Prefix, OpenAPI: "/openapi.yaml",
		Auth: IndexAuth{Keys: s.opts.Keyring.Enabled(), Tokens: s.opts.OAuth != nil,
			SignIn: s.opts.OAuth != nil && len(s.opts.OAuth.SignInIssuers()) > 0},
		Routes: contractRoutes(s.opts.OpenAPI), Docs: map[string]string{}}
	idx.Auth.None = !idx.Auth.Keys && !idx.Auth.Tokens
	if s.opts.MCP != nil {
		idx.MCP = "/mcp"
	}
	ref := "main"
	if v, _, _ := strings.Cut(s.opts.Version, " "); release.MatchString(v) {
		ref = v
	}
	for name, page := range indexDocs {
		idx.Docs[name] = docsRepo + ref + "/" + page
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if wantsHTML(r) {
			http.Redirect(w, r, console.Prefix, http.StatusFound)
			return
		}
		writeJSON(w, http.StatusOK, idx)
	}
}

// wantsHTML reports whether the request is a browser's page load: its
// Accept names text/html (before any JSON). An API client sends
// application/json, */* or nothing.
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		switch {
		case err != nil:
			continue
		case mt == "text/html" || mt == "application/xhtml+xml":
			return true
		case mt == "application/json":
			return false
		}
	}
	return false
}

// contractRoutes lists the operations of an OpenAPI document, in its
// order of paths, methods in a fixed order; nil when it cannot be read.
func contractRoutes(doc []byte) []IndexRoute {
	var d struct {
		Paths yaml.Node `yaml:"paths"`
	}
	if yaml.NewDecoder(bytes.NewReader(doc)).Decode(&d) != nil || d.Paths.Kind != yaml.MappingNode {
		return nil
	}
	methods := []string{"get", "post", "put", "patch", "delete"}
	out := []IndexRoute{}
	for i := 0; i+1 < len(d.Paths.Content); i += 2 {
		path, item := d.Paths.Content[i].Value, d.Paths.Content[i+1]
		var ops map[string]yaml.Node // methods, and parameters (a list)
		if item.Decode(&ops) != nil {
			continue
		}
		for _, m := range methods {
			var op struct {
				Summary string `yaml:"summary"`
			}
			if n, ok := ops[m]; ok && n.Decode(&op) == nil {
				out = append(out, IndexRoute{Method: strings.ToUpper(m), Path: path, Summary: op.Summary})
			}
		}
	}
	return slices.Clip(out)
}
