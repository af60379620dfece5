package consult

import (
	"testing"
)

// TestAPIRequest: what a model API receives is the chat completions body
// the provider's configuration makes — the system message first, the
// prompt, the model, the sampling settings — byte for byte, and the
// answer's metadata counts the Client's attempts.
func TestAPIRequest(t *testing.T) {
	e := newEnv(t)
	api := e.apiProvider("small")
	temp := 0.5
	api.System, api.MaxTokens, api.Temperature = "You review <code> & tests.", 256, &temp
	r := e.build(Config{Providers: map[string]ProviderConfig{"api": api}})
	resp := r.one(`{"prompt":"why \"this\"?","provider":"api"}`)
	want := `{"max_tokens":256,"messages":[{"content":"You review \u003ccode\u003e \u0026 tests.","role":"system"},` +
		`{"content":"why \"this\"?","role":"user"}],"model":"small","stream":false,"temperature":0.5}`
	if got := e.api.lastBody(); got != want {
		t.Errorf("the API received\n%s\nwant\n%s", got, want)
	}
	if resp.Metadata["attempts"] != float64(1) || resp.Metadata["endpoint"] == nil {
		t.Errorf("metadata %v", resp.Metadata)
	}
}
