package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/tools"
)

// streamTool emits its chunks one by one, delay apart, and reports whether
// its context was cancelled.
type streamTool struct{ cancelled chan struct{} }

func (streamTool) Spec() tools.Spec {
	return tools.Spec{Name: "stream", Description: "Streams chunks.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object","properties":{"chunks":{"type":"array","items":{"type":"string"}},"delay_ms":{"type":"integer"},"fail":{"type":"boolean"}}}`)}
}

func (s streamTool) Execute(ctx context.Context, c *tools.Call) (any, error) {
	var in struct {
		Chunks  []string
		DelayMS int `json:"delay_ms"`
		Fail    bool
	}
	_ = json.Unmarshal(c.Args, &in)
	for i, ch := range in.Chunks {
		stream := "stdout"
		if i%2 == 1 {
			stream = "stderr"
		}
		c.Emit(stream, ch)
		select {
		case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
		case <-ctx.Done():
			close(s.cancelled)
			return nil, ctx.Err()
		}
	}
	if in.Fail {
		return nil, tools.NewUserError("failed after streaming")
	}
	return map[string]int{"chunks": len(in.Chunks)}, nil
}

type event struct{ name, data string }

func (h *harness) stream(ctx context.Context, tool, body string, each func(event) bool) (*http.Response, []event) {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", h.url+"/tools/"+tool+"/execute", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		return resp, nil
	}
	var events []event
	var cur event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "":
			events = append(events, cur)
			if each != nil && !each(cur) {
				return resp, events
			}
			cur = event{}
		}
	}
	return resp, events
}

func TestStreaming(t *testing.T) {
	st := streamTool{cancelled: make(chan struct{})}
	h := newHarness(t, harnessOpts{tools: append(testTools(), st)})
	_, events := h.stream(context.Background(), "stream", `{"chunks":["a\n","b\n","c\n"],"delay_ms":5}`, nil)
	var names []string
	var chunks string
	for _, e := range events {
		names = append(names, e.name)
		schema := map[string]string{"start": "StreamStart", "output": "StreamOutput", "end": "Envelope", "error": "Envelope"}[e.name]
		if schema == "" {
			t.Fatalf("unknown event %q", e.name)
		}
		apitest.CheckSchema(t, schema, []byte(e.data))
		if e.name == "output" {
			var c tools.Chunk
			json.Unmarshal([]byte(e.data), &c)
			chunks += c.Stream + ":" + c.Data
		}
	}
	if strings.Join(names, ",") != "start,output,output,output,end" || chunks != "stdout:a\nstderr:b\nstdout:c\n" {
		t.Fatalf("events %v, chunks %q", names, chunks)
	}
	// A failure after the stream opened ends with an error event.
	_, events = h.stream(context.Background(), "stream", `{"chunks":["x"],"fail":true}`, nil)
	if last := events[len(events)-1]; last.name != "error" || !strings.Contains(last.data, "user_error") {
		t.Errorf("last event %+v", last)
	}
}

// TestStreamRefusalIsPlain: a call refused before running gets a plain
// envelope with its own status, not a stream.
func TestStreamRefusalIsPlain(t *testing.T) {
	h := newHarness(t, harnessOpts{tools: append(testTools(), streamTool{})})
	resp, events := h.stream(context.Background(), "stream", `{"chunks":"not an array"}`, nil)
	if resp.StatusCode != 400 || events != nil {
		t.Fatalf("status %d, %d events", resp.StatusCode, len(events))
	}
}

func TestStreamDisconnectCancels(t *testing.T) {
	st := streamTool{cancelled: make(chan struct{})}
	h := newHarness(t, harnessOpts{tools: append(testTools(), st)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.stream(ctx, "stream", `{"chunks":["1","2","3","4"],"delay_ms":10000}`, func(e event) bool {
		if e.name == "output" {
			cancel() // the client goes away after the first chunk
			return false
		}
		return true
	})
	select {
	case <-st.cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("the tool was not cancelled when the client left")
	}
}

// confirmTool requires confirmation.
type confirmTool struct{ runs chan string }

func (confirmTool) Spec() tools.Spec {
	return tools.Spec{Name: "dangerous", Description: "Needs confirmation.", Category: tools.Direct, Confirmation: tools.ConfirmToken,
		Parameters: json.RawMessage(`{"type":"object","properties":{"target":{"type":"string"},"force":{"type":"boolean"}}}`)}
}

func (c confirmTool) Execute(_ context.Context, call *tools.Call) (any, error) {
	c.runs <- string(call.Args)
	return "done", nil
}

func TestConfirmation(t *testing.T) {
	ct := confirmTool{runs: make(chan string, 10)}
	const keyA, keyB = "toold_confirm_key_a_0123456789", "toold_confirm_key_b_0123456789"
	h := newHarness(t, harnessOpts{tools: append(testTools(), ct), keys: authKeys(keyA, keyB)})
	asA := map[string]string{"Authorization": "Bearer " + keyA}
	r := h.exec("dangerous", `{"target":"prod","force":true}`, asA)
	if r.status != 428 || r.env.Error.Type != tools.ConfirmationRequired || r.env.Error.ConfirmToken == "" || r.env.Error.ConfirmExpiresAt == "" {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	token := r.env.Error.ConfirmToken
	with := func(key, tok string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "Toold-Confirm": tok}
	}
	tests := []struct {
		name, body string
		header     map[string]string
		status     int
	}{
		{"other arguments", `{"target":"dev","force":true}`, with(keyA, token), 428},
		{"other caller", `{"target":"prod","force":true}`, with(keyB, token), 428},
		{"garbage token", `{"target":"prod","force":true}`, with(keyA, "xyz"), 428},
		{"same call, keys reordered", `{ "force": true, "target": "prod" }`, with(keyA, token), 200},
		{"replay", `{"target":"prod","force":true}`, with(keyA, token), 428},
	}
	for _, tt := range tests {
		r := h.exec("dangerous", tt.body, tt.header)
		if r.status != tt.status {
			t.Errorf("%s: %d %s", tt.name, r.status, r.body)
		}
	}
	if n := len(ct.runs); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

func authKeys(keys ...string) []auth.Key {
	var out []auth.Key
	for i, k := range keys {
		out = append(out, auth.Key{Name: string(rune('a' + i)), SHA256: auth.Hash(k), Tools: []string{"*"}})
	}
	return out
}

// TestWriteTimeoutBoundsEachWrite: the write timeout bounds each write, not
// the response: a call that answers after it, and a stream that lasts
// several times as long, both arrive whole.
func TestWriteTimeoutBoundsEachWrite(t *testing.T) {
	const window = 500 * time.Millisecond
	st := streamTool{cancelled: make(chan struct{})}
	h := newHarness(t, harnessOpts{tools: append(testTools(), st), writeTimeout: window})
	if r := h.exec("sleep", `{"ms":1200}`, nil); r.status != 200 || r.env.Status != "success" {
		t.Fatalf("a call longer than the write timeout: %d %s", r.status, r.body)
	}
	chunks := make([]string, 16)
	for i := range chunks {
		chunks[i] = "x\n"
	}
	body, _ := json.Marshal(map[string]any{"chunks": chunks, "delay_ms": 100})
	start := time.Now()
	_, events := h.stream(context.Background(), "stream", string(body), nil)
	if len(events) == 0 || events[len(events)-1].name != "end" || len(events) != len(chunks)+2 {
		t.Fatalf("a stream of %v under a %v write timeout ended after %d events: %v", time.Since(start), window, len(events), events)
	}
	if d := time.Since(start); d < 3*window {
		t.Fatalf("the stream lasted %v, not past the write timeout (%v): the test proves nothing", d, window)
	}
}
