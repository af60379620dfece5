package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/mcpserver"
	"github.com/toold/toold/internal/tools"
)

// plantedSecret lies past every head: the output sanitizer must redact it
// in the artifact as it would in the answer.
const plantedSecret = "ghp_Zq8XcV2bN4mL6kJ9hG3fD5sA7pO1iU0yTr2w"

// bigTool returns some 5 MB of log lines, the last of which holds a
// token: a result far over any budget.
type bigTool struct{}

func (bigTool) Spec() tools.Spec {
	// Under -race on a busy machine, 5 MB take seconds to build and sanitize.
	return tools.Spec{Name: "big", Description: "Returns a 5 MB log.", Category: tools.Direct,
		Limits:     tools.Limits{Timeout: time.Minute, Target: 10 * time.Second, Max: 30 * time.Second},
		Parameters: json.RawMessage(`{"type":"object","properties":{"lines":{"type":"integer","minimum":1,"maximum":100000}}}`)}
}

func (bigTool) Execute(_ context.Context, c *tools.Call) (any, error) {
	var args struct {
		Lines int `json:"lines"`
	}
	if err := c.Decode(&args); err != nil {
		return nil, err
	}
	if args.Lines == 0 {
		args.Lines = 50_000
	}
	lines := make([]string, args.Lines)
	for i := range lines {
		lines[i] = fmt.Sprintf("%06d %s", i, strings.Repeat("log line text ", 7))
	}
	lines[len(lines)-1] = "deploy finished; token=" + plantedSecret
	return map[string]any{"lines": lines}, nil
}

// TestOutputBudgets: a 5 MB result is answered with a head within the
// server's budget and kept whole, sanitized, for its caller alone — over
// REST (with ranged reads), in a batch, as an async execution's record,
// and over MCP (a resource_link that resources/read returns).
func TestOutputBudgets(t *testing.T) {
	const budget = 256 << 10
	h := newHarness(t, harnessOpts{keys: roleKeys, store: true, mcp: true, budget: budget,
		tools: append(testTools(), bigTool{})})
	h.http.Timeout = 2 * time.Minute
	alice := bearer(keyAlice)

	// whole reads an artifact and checks it: the whole result, valid
	// JSON, every line there, the token redacted.
	whole := func(t *testing.T, a *dispatch.Artifact) []byte {
		t.Helper()
		r := h.do("GET", a.URI, nil, alice)
		if r.status != 200 || int64(len(r.body)) != a.Bytes || r.header.Get("Accept-Ranges") != "bytes" {
			t.Fatalf("GET %s: %d, %d bytes of %d, Accept-Ranges %q", a.URI, r.status, len(r.body), a.Bytes, r.header.Get("Accept-Ranges"))
		}
		var v struct{ Lines []string }
		if err := json.Unmarshal(r.body, &v); err != nil || len(v.Lines) != 50_000 {
			t.Fatalf("the artifact is not the whole result: %v, %d lines", err, len(v.Lines))
		}
		if strings.Contains(string(r.body), plantedSecret) || !strings.Contains(v.Lines[len(v.Lines)-1], "[REDACTED:github_token]") {
			t.Fatalf("the token past the head is not redacted in the artifact: %q", v.Lines[len(v.Lines)-1])
		}
		return r.body
	}
	// head checks an answer's envelope: a head within budget, linked.
	head := func(t *testing.T, how string, env *dispatch.Envelope) *dispatch.Artifact {
		t.Helper()
		a := env.Artifact
		if env.Status != dispatch.StatusSuccess || a == nil || len(env.Data) > budget || a.Bytes < 5_000_000 ||
			a.OmittedBytes != a.Bytes-int64(len(env.Data)) || !dispatch.ValidArtifactID(a.ID) || a.URI != "/artifacts/"+a.ID ||
			time.Until(a.ExpiresAt) < time.Hour {
			t.Fatalf("%s: status %s, %d bytes of data, artifact %+v", how, env.Status, len(env.Data), a)
		}
		if strings.Contains(string(env.Data), "ghp_") || !json.Valid(env.Data) {
			t.Fatalf("%s: the head is not sanitized JSON", how)
		}
		if !strings.Contains(strings.Join(env.Sanitized.Notes, "\n"), a.URI) {
			t.Errorf("%s: no note says where the whole is: %v", how, env.Sanitized.Notes)
		}
		return a
	}

	t.Run("rest", func(t *testing.T) {
		r := h.exec("big", `{}`, alice)
		if r.status != 200 || len(r.body) > budget+8<<10 {
			t.Fatalf("execute: %d, %d bytes", r.status, len(r.body))
		}
		a := head(t, "execute", &r.env)
		all := whole(t, a)
		n := int64(len(all))
		for _, c := range []struct {
			rng, want, contentRange string
		}{
			{"bytes=0-99", string(all[:100]), fmt.Sprintf("bytes 0-99/%d", n)},
			{"bytes=-10", string(all[n-10:]), fmt.Sprintf("bytes %d-%d/%d", n-10, n-1, n)},
			{fmt.Sprintf("bytes=%d-", n-5000), string(all[n-5000:]), fmt.Sprintf("bytes %d-%d/%d", n-5000, n-1, n)},
		} {
			r := h.do("GET", a.URI, nil, bearer(keyAlice, "Range", c.rng))
			if r.status != 206 || string(r.body) != c.want || r.header.Get("Content-Range") != c.contentRange {
				t.Errorf("Range %s: %d %q, %d bytes", c.rng, r.status, r.header.Get("Content-Range"), len(r.body))
			}
		}
		// Several ranges: multipart/byteranges, each part the bytes asked.
		multi := h.do("GET", a.URI, nil, bearer(keyAlice, "Range", "bytes=0-9,1000000-1000009,-5"))
		_, params, _ := mime.ParseMediaType(multi.header.Get("Content-Type"))
		mr := multipart.NewReader(bytes.NewReader(multi.body), params["boundary"])
		var parts []string
		for p, err := mr.NextPart(); err == nil; p, err = mr.NextPart() {
			b, _ := io.ReadAll(p)
			parts = append(parts, string(b))
		}
		if multi.status != 206 || fmt.Sprint(parts) != fmt.Sprint([]string{string(all[:10]), string(all[1000000:1000010]), string(all[n-5:])}) {
			t.Errorf("three ranges: %d %q", multi.status, parts)
		}
		for _, c := range []struct{ rng, contentRange string }{
			{fmt.Sprintf("bytes=%d-", n), fmt.Sprintf("bytes */%d", n)},
			{"bytes=99999999-", fmt.Sprintf("bytes */%d", n)},
			{"bytes=1-2x", ""}, // not a range at all
			{"bytes=" + strings.Repeat("0-0,", 20) + "1-1", fmt.Sprintf("bytes */%d", n)}, // too many
		} {
			r := h.do("GET", a.URI, nil, bearer(keyAlice, "Range", c.rng))
			if r.status != 416 || r.env.Error == nil || r.env.Error.Code != tools.CodeInvalidRange || r.env.Error.Suggestion == "" ||
				r.header.Get("Content-Range") != c.contentRange {
				t.Errorf("Range %s: %d %q %s", c.rng, r.status, r.header.Get("Content-Range"), r.body)
			}
		}
		// Another principal, an unknown id, a malformed one: nothing.
		for _, c := range []struct{ path, key string }{{a.URI, keyBob}, {"/artifacts/art_" + strings.Repeat("0", 32), keyAlice},
			{"/artifacts/..%2Fexecutions", keyAlice}, {"/artifacts/" + strings.ToUpper(a.ID), keyAlice}} {
			if r := h.do("GET", c.path, nil, bearer(c.key)); r.status != 404 || r.env.Error == nil || r.env.Error.Code != tools.CodeNoArtifact {
				t.Errorf("GET %s as %s: %d %s", c.path, c.key, r.status, r.body)
			}
		}
		if r := h.do("GET", a.URI, nil, nil); r.status != 401 {
			t.Errorf("GET without a key: %d", r.status)
		}
		// A result within the budget is answered whole, with no artifact.
		if r := h.exec("big", `{"lines":10}`, alice); r.status != 200 || r.env.Artifact != nil || strings.Contains(string(r.body), `"artifact"`) {
			t.Errorf("a small result: %d %s", r.status, r.body)
		}
	})

	t.Run("batch", func(t *testing.T) {
		r := h.do("POST", "/batch", []byte(`{"calls":[{"tool":"big","arguments":{}},{"tool":"echo","arguments":{"message":"x"}},{"tool":"big","arguments":{}}]}`), alice)
		var res executions.BatchResult
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || len(res.Results) != 3 || len(r.body) > 2*budget+16<<10 {
			t.Fatalf("batch: %d, %d bytes", r.status, len(r.body))
		}
		a, b := head(t, "batch[0]", res.Results[0].Envelope), head(t, "batch[2]", res.Results[2].Envelope)
		if a.ID == b.ID {
			t.Errorf("two calls share an artifact: %s", a.ID)
		}
		whole(t, b)
	})

	t.Run("async", func(t *testing.T) {
		r := h.do("POST", "/executions", []byte(`{"tool":"big","arguments":{}}`), bearer(keyAlice, "Prefer", "respond-async, wait=10"))
		if r.status != 200 {
			t.Fatalf("submit: %d %.300s", r.status, r.body)
		}
		a := head(t, "async", &r.env)
		// The record as another replica reads it: from the store.
		rec := h.do("GET", "/executions/"+r.env.ExecutionID, nil, alice)
		if rec.status != 200 || len(rec.body) > budget+8<<10 || rec.env.Artifact == nil || rec.env.Artifact.ID != a.ID {
			t.Fatalf("the record: %d, %d bytes, %+v", rec.status, len(rec.body), rec.env.Artifact)
		}
		whole(t, a)
	})

	t.Run("mcp", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		connect := func(key string) *mcp.ClientSession {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "budget-test", Version: "1"}, nil).Connect(ctx,
				&mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", HTTPClient: &http.Client{Transport: apitest.Bearer(key, nil)}, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cs.Close() })
			return cs
		}
		cs := connect(keyAlice)
		if init := cs.InitializeResult(); init.Capabilities.Resources == nil {
			t.Errorf("no resources capability: %+v", init.Capabilities)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "big", Arguments: map[string]any{}})
		if err != nil || res.IsError || len(res.Content) != 2 {
			t.Fatalf("tools/call: %v %+v", err, res)
		}
		text, _ := res.Content[0].(*mcp.TextContent)
		link, _ := res.Content[1].(*mcp.ResourceLink)
		if text == nil || len(text.Text) > budget || strings.Contains(text.Text, "ghp_") {
			t.Fatalf("the head: %T", res.Content[0])
		}
		if link == nil || !strings.HasPrefix(link.URI, "toold://artifacts/art_") || link.Size == nil || *link.Size < 5_000_000 ||
			link.MIMEType != "application/json" || !strings.Contains(link.Description, "resources/read") {
			t.Fatalf("the link: %+v", res.Content[1])
		}
		read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
		if err != nil || len(read.Contents) != 1 || int64(len(read.Contents[0].Text)) != *link.Size {
			t.Fatalf("resources/read: %v", err)
		}
		got := read.Contents[0].Text
		if strings.Contains(got, plantedSecret) || !strings.Contains(got, "[REDACTED:github_token]") || !json.Valid([]byte(got)) {
			t.Errorf("resources/read is not the sanitized whole")
		}
		part, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI + "?offset=100&length=50"})
		if err != nil || part.Contents[0].Text != got[100:150] {
			t.Errorf("a part: %v", err)
		}
		// The same result over REST, by the id the link names.
		id := strings.TrimPrefix(link.URI, "toold://artifacts/")
		if r := h.do("GET", "/artifacts/"+id, nil, alice); string(r.body) != got {
			t.Errorf("REST and MCP read different wholes: %d", r.status)
		}
		for _, c := range []struct{ key, uri, want string }{
			{keyBob, link.URI, "not found"},
			{keyAlice, "toold://artifacts/art_" + strings.Repeat("f", 32), "not found"},
			{keyAlice, link.URI + "?length=0", "length must be"},
			{keyAlice, link.URI + "?offset=-1", "offset must be"},
			{keyAlice, link.URI + "?page=2", "unknown parameter"},
		} {
			cs := cs
			if c.key != keyAlice {
				cs = connect(c.key)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: c.uri}); err == nil || !strings.Contains(strings.ToLower(err.Error()), c.want) {
				t.Errorf("resources/read %s as %s: %v", c.uri, c.key, err)
			}
		}
	})
}

// TestArtifactReadsAreCharged: reading an artifact, over REST or MCP's
// resources/read, is work the caller makes toold do, charged its
// principal's rate (auth.limits) as a search is: once the bucket is empty,
// GET /artifacts/{id} is refused 429 principal_rate with Retry-After, and
// resources/read with a server error whose data says principal_rate.
// Another principal's bucket is its own.
func TestArtifactReadsAreCharged(t *testing.T) {
	// A burst of 3 and a rate that refills nothing within the test.
	h := newHarness(t, harnessOpts{keys: roleKeys, store: true, mcp: true, budget: 64 << 10,
		tools: append(testTools(), bigTool{}), principals: limits.PrincipalConfig{Rate: 0.001, Burst: 3}})
	h.http.Timeout = 2 * time.Minute
	alice := bearer(keyAlice)
	r := h.exec("big", `{}`, alice) // 1
	a := r.env.Artifact
	if r.status != 200 || a == nil {
		t.Fatalf("execute: %d, artifact %+v", r.status, a)
	}
	if r := h.do("GET", a.URI, nil, hdr("Authorization", "Bearer "+keyAlice, "Range", "bytes=0-99")); r.status != 206 { // 2
		t.Fatalf("the first read: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "charge-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: h.url + "/mcp", HTTPClient: &http.Client{Transport: apitest.Bearer(keyAlice, nil)}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	uri := mcpserver.ArtifactScheme + a.ID + "?offset=0&length=100"
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri}); err != nil { // 3
		t.Fatalf("the first resources/read: %v", err)
	}

	r = h.do("GET", a.URI, nil, alice)
	if r.status != 429 || r.env.Error == nil || r.env.Error.Code != tools.CodePrincipalRate || r.header.Get("Retry-After") == "" {
		t.Errorf("a read past the rate: %d %s, Retry-After %q; want 429 %s", r.status, r.body, r.header.Get("Retry-After"), tools.CodePrincipalRate)
	}
	_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != mcpserver.CodeOverloaded || !strings.Contains(string(je.Data), `"code":"principal_rate"`) ||
		!strings.Contains(string(je.Data), "retry_after_ms") {
		t.Errorf("a resources/read past the rate: %v (%+v); want principal_rate with retry_after_ms", err, je)
	}
	if r := h.do("GET", a.URI, nil, bearer(keyBob)); r.status != 404 {
		t.Errorf("another principal: %d %s, want 404 (its own bucket, not its artifact)", r.status, r.body)
	}
}
