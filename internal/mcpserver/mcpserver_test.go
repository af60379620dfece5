package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/tools"
)

// versions are the protocol versions tests speak: the oldest, the one the
// issue names, and the newest (stateless, multi-round-trip).
var versions = []string{"2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func rpcCode(err error) int64 {
	var w *jsonrpc.Error
	if errors.As(err, &w) {
		return w.Code
	}
	return 0
}

func TestListAndCall(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := h.client(v, "", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			lr, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range lr.Tools {
				names = append(names, tl.Name)
				if tl.Name == "echo" && (tl.Annotations == nil || !tl.Annotations.ReadOnlyHint || tl.OutputSchema == nil || tl.Title != "Echo") {
					t.Errorf("echo as listed: %+v", tl)
				}
				if tl.Name == "danger" && (tl.Annotations == nil || tl.Annotations.DestructiveHint == nil || !*tl.Annotations.DestructiveHint) {
					t.Errorf("danger is not destructive: %+v", tl.Annotations)
				}
			}
			// Without a store the tools that always wait are not listed
			// (TestWaitingToolsNeedAStore).
			if want := []string{"ask_first", "danger", "echo", "fail", "sleep", "slow", "stream"}; !cmp.Equal(names, want) {
				t.Errorf("tools/list = %v, want %v", names, want)
			}

			res, err := callTool(t, cs, "echo", map[string]any{"message": "hi"}, nil)
			if err != nil || res.IsError {
				t.Fatalf("echo: %v %+v", err, res)
			}
			if got := structured(t, res); !cmp.Equal(got, map[string]any{"message": "hi", "length": 2.0}) {
				t.Errorf("structuredContent = %v", got)
			}
			if text(res) != `{"message":"hi","length":2}` {
				t.Errorf("text = %q, want the same JSON", text(res))
			}
			env, _ := res.Meta["toold/envelope"].(map[string]any)
			if env["status"] != "success" || env["request_id"] == "" {
				t.Errorf("_meta envelope = %v", env)
			}

			res, err = callTool(t, cs, "echo", map[string]any{"mesage": "hi"}, nil)
			if err != nil || !res.IsError {
				t.Fatalf("a validation failure must be isError: %v %+v", err, res)
			}
			for _, want := range []string{"validation_error", "/message is required", `did you mean \"message\"`, "What to do:", `A valid call: {"message":"hello"}`} {
				if !strings.Contains(text(res), want) && !strings.Contains(strings.ReplaceAll(text(res), `"`, `\"`), want) {
					t.Errorf("validation text %q lacks %q", text(res), want)
				}
			}
			if res.StructuredContent != nil {
				t.Errorf("echo declares an output schema: an error must not be its structuredContent: %v", res.StructuredContent)
			}

			res, err = callTool(t, cs, "fail", map[string]any{}, nil)
			if err != nil || !res.IsError {
				t.Fatalf("fail: %v %+v", err, res)
			}
			if got := structured(t, res); got["type"] != "user_error" || got["suggestion"] != "create it first" {
				t.Errorf("the envelope's error as structuredContent: %v", got)
			}

			_, err = callTool(t, cs, "nope", map[string]any{}, nil)
			if rpcCode(err) != jsonrpc.CodeInvalidParams || !strings.Contains(err.Error(), `unknown tool "nope"`) {
				t.Errorf("unknown tool: %v", err)
			}
		})
	}
}

// TestKeysScopeTools: a key sees only its tools in tools/list and is
// refused the others exactly as a tool that does not exist.
func TestKeysScopeTools(t *testing.T) {
	h := newHarness(t, harnessOpts{keys: true})
	cs := h.client("2025-06-18", echoKey, nil)
	ctx := context.Background()
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Tools) != 1 || lr.Tools[0].Name != "echo" {
		t.Errorf("echo-only key lists %v", lr.Tools)
	}
	if res, err := callTool(t, cs, "echo", map[string]any{"message": "x"}, nil); err != nil || res.IsError {
		t.Errorf("echo with its key: %v %v", err, res)
	}
	_, errSleep := callTool(t, cs, "sleep", map[string]any{"ms": 1}, nil)
	_, errNope := callTool(t, cs, "nope", map[string]any{}, nil)
	if rpcCode(errSleep) != jsonrpc.CodeInvalidParams || strings.ReplaceAll(errSleep.Error(), "sleep", "X") != strings.ReplaceAll(errNope.Error(), "nope", "X") {
		t.Errorf("a forbidden tool must look absent: %v vs %v", errSleep, errNope)
	}
	full := h.client("2025-06-18", fullKey, nil)
	if lr, err := full.ListTools(ctx, nil); err != nil || len(lr.Tools) != 7 {
		t.Errorf("full key lists %d tools: %v", len(lr.Tools), err)
	}
}

// TestWaitingToolsNeedAStore: a tool that always waits (for an answer, or
// a person's approval) is listed only where a store keeps waits; without
// one (-stdio without state.dir, state.enabled: false) it is not listed,
// and a call by name is refused with no_store, not retryable — never a
// retryable store_unavailable a model would retry forever.
func TestWaitingToolsNeedAStore(t *testing.T) {
	waiting := []string{"delegate", "guarded", "guarded_ask", "request_user_input"}
	for _, withStore := range []bool{false, true} {
		h := newHarness(t, harnessOpts{store: withStore})
		cs := h.client("2025-11-25", "", nil)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		lr, err := cs.ListTools(ctx, nil)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, tl := range lr.Tools {
			listed[tl.Name] = true
		}
		for _, name := range waiting {
			if listed[name] != withStore {
				t.Errorf("store %v: %s listed %v", withStore, name, listed[name])
			}
		}
		if !listed["echo"] {
			t.Errorf("store %v: echo is not listed", withStore)
		}
		if withStore {
			continue
		}
		for _, name := range []string{"request_user_input", "guarded"} {
			args := map[string]any{}
			if name == "request_user_input" {
				args["prompt"] = "Which branch?"
			}
			res, err := callTool(t, cs, name, args, nil)
			if err != nil || !res.IsError {
				t.Fatalf("%s by name without a store: %v %+v", name, err, res)
			}
			e, _ := res.Meta["toold/error"].(map[string]any)
			if e["code"] != "no_store" || e["retryable"] != false || e["type"] != "user_error" {
				t.Errorf("%s by name without a store: %v", name, e)
			}
		}
	}
}

// TestProgress: streamed output reaches a client that sent a progress
// token as notifications/progress, redacted like every output.
func TestProgress(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, v := range []string{"2025-06-18", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var msgs []string
			cs := h.client(v, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				msgs = append(msgs, r.Params.Message)
			}})
			res, err := callTool(t, cs, "stream", map[string]any{}, mcp.Meta{"progressToken": "p1"})
			if err != nil || res.IsError {
				t.Fatalf("stream: %v %v", err, res)
			}
			// Notifications are handled apart from the response: wait
			// for them a little.
			var joined string
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				mu.Lock()
				joined = strings.Join(msgs, "")
				mu.Unlock()
				if strings.Contains(joined, "REDACTED") {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(joined, "first line") || !strings.Contains(joined, "[REDACTED:github_token]") || strings.Contains(joined, "ghp_") {
				t.Errorf("progress messages %q", msgs)
			}
		})
	}
	cs := h.client("2025-06-18", "", &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		t.Error("progress without a progress token")
	}})
	if _, err := callTool(t, cs, "stream", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestCancel: notifications/cancelled cancels the call's context, over
// stateless HTTP (toold's table of calls in flight) and over stdio (the
// SDK's session).
func TestCancel(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, tc := range []struct {
		name    string
		connect func() *mcp.ClientSession
	}{
		{"http 2025-06-18", func() *mcp.ClientSession { return h.client("2025-06-18", "", nil) }},
		{"http 2026-07-28", func() *mcp.ClientSession { return h.client("2026-07-28", "", nil) }},
		{"stdio", func() *mcp.ClientSession { return h.stdio(nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := tc.connect()
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
				errc <- err
			}()
			select {
			case <-h.slow.started:
			case <-time.After(5 * time.Second):
				t.Fatal("the call never started")
			}
			cancel()
			select {
			case err := <-h.slow.ended:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the tool ended with %v, want its context cancelled", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the tool's context was not cancelled")
			}
			if err := <-errc; err == nil {
				t.Error("the cancelled call returned no error to its client")
			}
		})
	}
}

// stdio connects a client to ServeStdio over pipes.
func (h *harness) stdio(opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	return h.stdioAt("2025-06-18", opts)
}

// stdioAt is a client of ServeStdio speaking version.
func (h *harness) stdioAt(version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.mcp.ServeStdio(ctx, sr, sw) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "1"}, opts)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: cr, Writer: cw}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		_ = cs.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				h.t.Errorf("ServeStdio: %v", err)
			}
		case <-time.After(5 * time.Second):
			h.t.Error("ServeStdio did not return")
		}
	})
	return cs
}

// TestConfirmation: an older client gets isError with the token in _meta
// and repeats the call with it; a 2026-07-28 client that elicits is asked
// through an input_required result, and its user's answer decides.
func TestConfirmation(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	runs := func() int {
		dangerRuns.Lock()
		defer dangerRuns.Unlock()
		return dangerRuns.n
	}
	t.Run("token in _meta", func(t *testing.T) {
		cs := h.client("2025-06-18", "", nil)
		before := runs()
		res, err := callTool(t, cs, "danger", map[string]any{"what": "x"}, nil)
		if err != nil || !res.IsError || !strings.Contains(text(res), "confirmation_required") {
			t.Fatalf("first call: %v %v", err, res)
		}
		tok, _ := res.Meta["toold/confirm_token"].(string)
		exp, _ := res.Meta["toold/confirm_expires_at"].(string)
		if _, err := time.Parse(time.RFC3339, exp); tok == "" || err != nil {
			t.Fatalf("no token in _meta: %v", res.Meta)
		}
		other, err := callTool(t, cs, "danger", map[string]any{"what": "y"}, mcp.Meta{"toold/confirm_token": tok})
		if err != nil || !other.IsError {
			t.Errorf("a token for other arguments ran the tool: %v %v", err, other)
		}
		res, err = callTool(t, cs, "danger", map[string]any{"what": "x"}, mcp.Meta{"toold/confirm_token": tok})
		if err != nil || res.IsError {
			t.Fatalf("confirmed call: %v %v", err, text(res))
		}
		if runs() != before+1 {
			t.Errorf("the tool ran %d times, want once", runs()-before)
		}
	})
	for _, tc := range []struct {
		name   string
		answer *mcp.ElicitResult
		ran    bool
	}{
		{"input_required, accepted", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, true},
		{"input_required, declined", &mcp.ElicitResult{Action: "decline"}, false},
		{"input_required, accepted without confirm", &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": false}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked string
			cs := h.client("2026-07-28", "", &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked = r.Params.Message
				return tc.answer, nil
			}})
			before := runs()
			res, err := callTool(t, cs, "danger", map[string]any{"what": "x"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(asked, "danger") {
				t.Errorf("the user was asked %q", asked)
			}
			if got := runs() - before; (got == 1) != tc.ran || got > 1 {
				t.Errorf("the tool ran %d times", got)
			}
			if res.IsError == tc.ran {
				t.Errorf("isError = %v: %s", res.IsError, text(res))
			}
			if !tc.ran && !strings.Contains(text(res), "declined") {
				t.Errorf("a declined call says %q", text(res))
			}
		})
	}
}

// ackWatch closes acked once a response says
// notifications/subscriptions/acknowledged: the subscription is open.
type ackWatch struct {
	base  http.RoundTripper
	acked chan struct{}
	once  *sync.Once
}

func (a ackWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &ackReader{ReadCloser: resp.Body, w: a}
	}
	return resp, err
}

// ackReader passes a stream through, watching it for the acknowledgement.
type ackReader struct {
	io.ReadCloser
	w    ackWatch
	seen []byte // the end of what was read, for a word split between reads
}

func (r *ackReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	const word = "notifications/subscriptions/acknowledged"
	r.seen = append(r.seen, p[:n]...)
	if bytes.Contains(r.seen, []byte(word)) {
		r.w.once.Do(func() { close(r.w.acked) })
	}
	if len(r.seen) > len(word) {
		r.seen = r.seen[len(r.seen)-len(word):]
	}
	return n, err
}

// TestListChanged: a change of the registry reaches the clients that hold
// a session — stdio, and a 2026-07-28 client's subscription — and every
// client sees the new list.
func TestListChanged(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	notified := map[string]chan struct{}{"http 2026-07-28": make(chan struct{}, 4), "stdio": make(chan struct{}, 4)}
	onChange := func(name string) *mcp.ClientOptions {
		return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			notified[name] <- struct{}{}
		}}
	}
	// The 2026-07-28 client opens its subscription after it connects;
	// toold says it listens with the stream's first message.
	acked := make(chan struct{})
	clients := map[string]*mcp.ClientSession{
		"http 2026-07-28": h.clientVia("/mcp", "2026-07-28", "", onChange("http 2026-07-28"), func(rt http.RoundTripper) http.RoundTripper {
			return ackWatch{rt, acked, &sync.Once{}}
		}),
		"stdio":           h.stdio(onChange("stdio")),
		"http 2025-06-18": h.client("2025-06-18", "", nil),
	}
	select {
	case <-acked:
	case <-time.After(10 * time.Second):
		t.Fatal("toold never acknowledged the 2026-07-28 client's subscription")
	}
	if errs := h.live.SetSource("up", []tools.Tool{upTool{}}); errs != nil {
		t.Fatal(errs)
	}
	for name, ch := range notified {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Errorf("%s was not told the list changed", name)
		}
	}
	for name, cs := range clients {
		lr, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__ping" }) {
			t.Errorf("%s does not list the new tool by its MCP name", name)
		}
		for _, called := range []string{"up__ping", "up.ping"} { // the canonical name is an alias
			if res, err := callTool(t, cs, called, map[string]any{}, nil); err != nil || res.IsError {
				t.Errorf("%s calling the new tool as %s: %v %v", name, called, err, res)
			}
		}
	}
	h.live.SetSource("up", nil)
	if _, err := callTool(t, clients["stdio"], "up.ping", map[string]any{}, nil); rpcCode(err) != jsonrpc.CodeInvalidParams {
		t.Errorf("a removed tool: %v", err)
	}
}

type upTool struct{}

func (upTool) Spec() tools.Spec {
	return tools.Spec{Name: "up.ping", Description: "Pings.", Category: tools.MCP, Source: "up",
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (upTool) Execute(context.Context, *tools.Call) (any, error) {
	return map[string]any{"pong": true}, nil
}
