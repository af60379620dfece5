package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/diag"
)

// hosted is a tool as an upstream MCP server's tools are named: server.tool.
type hosted struct {
	tools.Tool
	name string
}

func (h hosted) Spec() tools.Spec {
	s := h.Tool.Spec()
	s.Name, s.Source = h.name, strings.Split(h.name, ".")[0]
	return s
}

// TestFunctionNamesExecute: a model given the openai or anthropic listing
// calls a hosted tool by the name it was shown (up__echo); every way in
// accepts it as well as the canonical name, and answers with the canonical
// name, which is also what a key's allow-list is written with.
func TestFunctionNamesExecute(t *testing.T) {
	const key = "toold_key_for_tests_0123456789"
	h := newHarness(t, harnessOpts{tools: []tools.Tool{diag.Echo(), hosted{diag.Echo(), "up.echo"}}, store: true,
		keys: []auth.Key{{Name: "up-only", SHA256: auth.Hash(key), Tools: []string{"up.*"}}}})
	hdr := map[string]string{"Authorization": "Bearer " + key}

	var listing []struct{ Function struct{ Name string } }
	r := h.do("GET", "/tools?format=openai", nil, hdr)
	if err := json.Unmarshal(r.body, &listing); err != nil || len(listing) != 1 || listing[0].Function.Name != "up__echo" {
		t.Fatalf("openai listing for the key: %v %s", err, r.body)
	}
	for _, name := range []string{"up__echo", "up.echo"} {
		t.Run(name, func(t *testing.T) {
			r := h.exec(name, `{"message":"hi"}`, hdr)
			if r.status != http.StatusOK || r.env.Status != dispatch.StatusSuccess || r.env.Tool != "up.echo" {
				t.Fatalf("execute %s: %d %s", name, r.status, r.body)
			}
			if r := h.do("GET", "/tools/"+name, nil, hdr); r.status != http.StatusOK || !strings.Contains(string(r.body), `"function_name": "up__echo"`) &&
				!strings.Contains(string(r.body), `"function_name":"up__echo"`) {
				t.Errorf("GET /tools/%s: %d %s", name, r.status, r.body)
			}
			if r := h.do("GET", "/tools/"+name+"/schema", nil, hdr); r.status != http.StatusOK {
				t.Errorf("GET /tools/%s/schema: %d %s", name, r.status, r.body)
			}
			b := h.do("POST", "/batch", []byte(`{"calls":[{"id":"a","tool":"`+name+`","arguments":{"message":"x"}}]}`), hdr)
			var res struct {
				Results []struct{ Envelope dispatch.Envelope } `json:"results"`
			}
			if err := json.Unmarshal(b.body, &res); err != nil || b.status != http.StatusOK || len(res.Results) != 1 ||
				res.Results[0].Envelope.Status != dispatch.StatusSuccess || res.Results[0].Envelope.Tool != "up.echo" {
				t.Errorf("batch calling %s: %d %s", name, b.status, b.body)
			}
		})
	}
	// An async execution started by the function name is listed under
	// either name.
	sub := h.do("POST", "/executions", []byte(`{"tool":"up__echo","arguments":{"message":"later"}}`), hdr)
	if sub.status != http.StatusAccepted && sub.status != http.StatusOK {
		t.Fatalf("POST /executions by function name: %d %s", sub.status, sub.body)
	}
	for _, name := range []string{"up__echo", "up.echo"} {
		var page struct{ Executions []struct{ Tool string } }
		r := h.do("GET", "/executions?tool="+name, nil, hdr)
		if err := json.Unmarshal(r.body, &page); err != nil || len(page.Executions) != 1 || page.Executions[0].Tool != "up.echo" {
			t.Errorf("GET /executions?tool=%s: %d %s", name, r.status, r.body)
		}
	}
	// The alias of a tool the key may not use is as absent as the tool.
	if r := h.exec("echo", `{"message":"hi"}`, hdr); r.status != http.StatusForbidden {
		t.Errorf("a tool outside the key's list: %d %s", r.status, r.body)
	}
}
