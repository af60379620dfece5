package mcpserver

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// plainKeysRef is members (without values) written with encoding/json's tokenizer: the
// reference the scanner is held to.
func plainKeysRef(raw []byte, allowed []string) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	var seen []string
	for dec.More() {
		off := dec.InputOffset()
		t, err := dec.Token()
		k, _ := t.(string)
		if err != nil || !slices.Contains(allowed, k) || slices.Contains(seen, k) {
			return false
		}
		// Spelt without escapes: the raw name is the name in quotes.
		rest := bytes.TrimLeft(raw[off:], " \t\r\n,")
		if !bytes.HasPrefix(rest, []byte(`"`+k+`"`)) {
			return false
		}
		seen = append(seen, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return true
}

func TestPlainKeys(t *testing.T) {
	cases := []struct {
		raw  string
		want bool
	}{
		{`{}`, true},
		{` { "name" : "x" , "arguments" : {"a":[1,{"b":"}"}],"c":"\""} } `, true},
		{`{"name":"x","_meta":{"progressToken":1},"arguments":null}`, true},
		{`{"name":1.5e3,"arguments":true}`, true},
		{`{"Name":"x"}`, false},
		{`{"name":"x","name":"y"}`, false},
		{`{"n\u0061me":"x"}`, false},
		{`{"name":"x","extra":1}`, false},
		{`[]`, false},
		{`"name"`, false},
	}
	for _, c := range cases {
		if got := members([]byte(c.raw), paramKeys, nil); got != c.want {
			t.Errorf("members(%s) = %v, want %v", c.raw, got, c.want)
		}
		if got := plainKeysRef([]byte(c.raw), paramKeys); got != c.want {
			t.Errorf("the reference on %s = %v, want %v", c.raw, got, c.want)
		}
	}
}

// FuzzPlainKeys: on any valid JSON, the scanner agrees with the reference.
func FuzzPlainKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"name":"x","arguments":{"a":[1,"]"]}}`, `{"_meta":{},"name":"\\"}`, `{"name":[[]],"arguments":-0.5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) {
			return
		}
		if got, want := members([]byte(raw), paramKeys, nil), plainKeysRef([]byte(raw), paramKeys); got != want {
			t.Fatalf("members(%s) = %v, the reference says %v", raw, got, want)
		}
	})
}

// TestEncodeResult: the fast path's encoding of a result is the JSON value
// encoding/json gives (the SDK's MarshalJSON), whether appendResult knows
// its shape or hands it over part-way.
func TestEncodeResult(t *testing.T) {
	meta := json.RawMessage(`{"request_id":"r","status":"success"}`)
	data := json.RawMessage(`{"a":[1,"<b>&é"]}`)
	cases := map[string]*mcp.CallToolResult{
		"success": {Meta: mcp.Meta{MetaEnvelope: meta}, Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}, StructuredContent: data},
		"error": {Meta: mcp.Meta{MetaEnvelope: meta, MetaError: map[string]any{"type": "user_error"}}, IsError: true,
			Content: []mcp.Content{&mcp.TextContent{Text: "user_error: no"}}, StructuredContent: map[string]any{"type": "user_error"}},
		"no meta, empty content": {Content: []mcp.Content{}},
		"image after text": {Meta: mcp.Meta{MetaEnvelope: meta},
			Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.ImageContent{Data: []byte{1, 2}, MIMEType: "image/png"}}},
		"annotated text":   {Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: &mcp.Annotations{Priority: 1}}}},
		"request state":    {Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, RequestState: "s"},
		"unencodable meta": {Meta: mcp.Meta{"x": json.RawMessage(nil)}, Content: []mcp.Content{}},
	}
	for name, res := range cases {
		prefix := []byte(`{"result":`)
		got, err := encodeResult(prefix, res)
		want, werr := json.Marshal(res)
		if (err != nil) != (werr != nil) {
			t.Errorf("%s: error %v, encoding/json's %v", name, err, werr)
			continue
		}
		if err != nil {
			continue
		}
		var g, w any
		if !bytes.HasPrefix(got, prefix) || json.Unmarshal(got[len(prefix):], &g) != nil || json.Unmarshal(want, &w) != nil {
			t.Fatalf("%s: %s", name, got)
		}
		if diff := cmp.Diff(w, g); diff != "" {
			t.Errorf("%s (-encoding/json +fast path):\n%s", name, diff)
		}
	}
}
