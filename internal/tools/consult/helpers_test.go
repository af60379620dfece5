package consult

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
	"github.com/toold/toold/internal/tools/httpapi"
)

// env is what a test's providers run against: testdata/fake-ai copied
// where the unprivileged uid CLIs run as can execute it, a directory it
// records into, and a real OpenAI-compatible API on loopback.
type env struct {
	t      *testing.T
	fakes  string
	record string
	api    *fakeAPI
	// containment of the CLI providers (default none: every machine has
	// it; TestStatusesInEveryContainment runs the others).
	containment string
	// commands is the command section the CLI providers' sandbox is
	// resolved under (default empty).
	commands launch.Config
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, fakes: sharedDir(t, 0o755), record: sharedDir(t, 0o777), api: newFakeAPI(t), containment: "none"}
	src, err := os.ReadFile("testdata/fake-ai")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.fakes, "fake-ai"), src, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// sharedDir is a directory outside t.TempDir (whose parent is private to
// toold's user) that the run-as uid can reach.
func sharedDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "toold-consult-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cli is a provider running fake-ai in mode, configured as the gemini
// preset (json output, prompt on stdin, -m) with only the command, its
// PATH and its behaviour set.
func (e *env) cli(name, mode string) ProviderConfig {
	return ProviderConfig{Preset: "gemini", Command: "fake-ai", Sandbox: Sandbox{Sandbox: launch.Sandbox{Containment: e.containment,
		Env: map[string]string{"FAKE_MODE": mode, "FAKE_NAME": name, "FAKE_RECORD": e.record}}, Path: []string{e.fakes, "/usr/bin", "/bin"}}}
}

// text is a provider whose output is plain text, its prompt an argument.
func (e *env) text(name, mode string) ProviderConfig {
	p := e.cli(name, mode)
	p.Preset, p.Args, p.Output, p.Prompt = "", []string{"exec"}, "text", "arg"
	p.ModelFlag = "-m"
	return p
}

// apiProvider is a provider on the fake API with a default model.
func (e *env) apiProvider(model string) ProviderConfig {
	return ProviderConfig{BaseURL: e.api.URL + "/v1", DefaultModel: model, Allow: []string{"127.0.0.1"}, AllowHTTP: true,
		Retry: httpapi.RetryConfig{Attempts: 2, Base: time.Millisecond, Max: 5 * time.Millisecond}}
}

// recorded is what fake-ai named name recorded (its prompt, args or
// version checks), "" when nothing.
func (e *env) recorded(name, what string) string {
	b, _ := os.ReadFile(filepath.Join(e.record, name+"."+what))
	return string(b)
}

// rig serves a Set's tools through the pipeline, as toold does.
type rig struct {
	*env
	set     *Set
	disp    *dispatch.Dispatcher
	metrics *prometheus.Registry
}

func (e *env) build(cfg Config) *rig {
	e.t.Helper()
	r, err := e.tryBuild(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func (e *env) tryBuild(cfg Config) (*rig, error) {
	t := e.t
	ws := sharedDir(t, 0o755)
	l, err := launch.New(e.commands, ws)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	hs, err := httpapi.New(httpapi.Config{}, httpapi.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hs.Close() })
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{env: e, metrics: prometheus.NewRegistry()}
	r.set, err = New(cfg, Options{Launcher: l, HTTP: hs, Registerer: r.metrics,
		Redact: func(s string) string { return san.RedactString("consult_many", s) }})
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(registry.Options{}, r.set.Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	r.disp, err = dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: limits.New(limits.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return r, nil
}

// call runs a tool through the pipeline; chunks, when not nil, collects
// the stream as "label: data".
func (r *rig) call(tool, args string, chunks *[]string) *dispatch.Envelope {
	r.t.Helper()
	req := &dispatch.Request{Tool: tool, Body: []byte(args), RequestID: "test", Caller: "tester"}
	if chunks != nil {
		var mu sync.Mutex
		req.Emit = func(c tools.Chunk) {
			mu.Lock()
			defer mu.Unlock()
			*chunks = append(*chunks, c.Stream+": "+c.Data)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return r.disp.Execute(ctx, req)
}

// one runs consult and decodes its Response, failing on any other outcome.
func (r *rig) one(args string) Response {
	r.t.Helper()
	env := r.call("consult", args, nil)
	if env.Status != dispatch.StatusSuccess {
		r.t.Fatalf("consult %s: %s %+v", args, env.Status, env.Error)
	}
	var resp Response
	if err := json.Unmarshal(env.Data, &resp); err != nil {
		r.t.Fatalf("%s: %v", env.Data, err)
	}
	return resp
}

func (r *rig) many(args string) MultiResponse {
	r.t.Helper()
	env := r.call("consult_many", args, nil)
	if env.Status != dispatch.StatusSuccess {
		r.t.Fatalf("consult_many %s: %s %+v", args, env.Status, env.Error)
	}
	var m MultiResponse
	if err := json.Unmarshal(env.Data, &m); err != nil {
		r.t.Fatalf("%s: %v", env.Data, err)
	}
	return m
}

// fakeAPI is a real OpenAI-compatible chat completions server on
// loopback. The model asked for chooses its behaviour: slow and sleep1
// take 2s and 1s, broken answers 500, garbage answers text, empty an
// empty message, any other model an answer naming it.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	chats    int
	modelsOK bool
	// hold, when set, holds a chat asking for the model "barrier" until
	// it returns (see barrier).
	hold func(context.Context)
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{modelsOK: true}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/models" {
		f.mu.Lock()
		ok := f.modelsOK
		f.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"object":"list","data":[{"id":"small","object":"model"},{"id":"large","object":"model"}]}`)
		return
	}
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies, f.chats = append(f.bodies, string(body)), f.chats+1
	f.mu.Unlock()
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role, Content string
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"bad request"}}`)
		return
	}
	f.mu.Lock()
	hold := f.hold
	f.mu.Unlock()
	if req.Model == "barrier" && hold != nil {
		hold(r.Context())
	}
	pause := map[string]time.Duration{"slow": 2 * time.Second, "sleep1": time.Second}[req.Model]
	select {
	case <-time.After(pause):
	case <-r.Context().Done():
		return
	}
	switch req.Model {
	case "broken":
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, `{"error":{"message":"the model server crashed"}}`)
	case "garbage":
		io.WriteString(w, `<html>not an API</html>`)
	case "empty":
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`)
	default:
		prompt := req.Messages[len(req.Messages)-1].Content
		answer, _ := json.Marshal(fmt.Sprintf("api answers with model %s to a prompt of %d bytes", req.Model, len(prompt)))
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant",`+
			`"content":%s},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`,
			req.Model, answer)
	}
}

func (f *fakeAPI) lastBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		return ""
	}
	return f.bodies[len(f.bodies)-1]
}

func has(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
