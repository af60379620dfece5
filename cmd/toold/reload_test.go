package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toold/toold/internal/state/statetest"
)

// reloadConfigText is the file the reload tests start from: echo and sleep
// on, and extra lines (tools added by a reload).
func reloadConfigText(ws, extra string) string {
	return fmt.Sprintf(`workspace: %s
tools:
  echo: {enabled: true, limits: {max_in_flight: 64, max_queue: 512}}
%s`, ws, extra)
}

const sleepOn = "  sleep: {enabled: true}\n"

const stampTool = `commands:
  containment: none
  tools:
    - name: stamp
      description: Prints a stamp.
      argv: [echo, stamped]
`

// listed reports whether GET /tools lists the tool.
func listed(t *testing.T, url, tool string) bool {
	t.Helper()
	r := send(t, "GET", url+"/tools", "")
	var listing struct{ Tools []struct{ Name string } }
	if err := json.Unmarshal(r.body, &listing); err != nil {
		t.Fatalf("GET /tools: %v: %s", err, r.body)
	}
	return slices.ContainsFunc(listing.Tools, func(x struct{ Name string }) bool { return x.Name == tool })
}

// waitListed waits until the listing shows (or no longer shows) the tool.
func waitListed(t *testing.T, url, tool string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for listed(t, url, tool) != want {
		if time.Now().After(deadline) {
			t.Fatalf("the listing never had %s listed=%v", tool, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func metricValue(t *testing.T, admin, series string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// TestReloadUnderLoad: a loop of calls runs through reloads, and none
// fails or is lost; a removed tool's call in flight ends in success; the
// added tool is listed, and an MCP client connected before hears
// notifications/tools/list_changed and sees it; a bad file and a file
// changing what only a restart applies are refused, counted and logged,
// the old configuration serving on; SIGHUP reloads; the audit log has
// every reload with the file's hash.
func TestReloadUnderLoad(t *testing.T) {
	ws := workspace(t)
	path := filepath.Join(t.TempDir(), "toold.yaml")
	writeFile(t, path, reloadConfigText(ws, sleepOn))
	in := start(t, nil, "-config", path)

	changed := make(chan struct{}, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "reload-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: in.url + "/mcp", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// The removed tool's call, in flight through the reload.
	slow := make(chan *httpAnswer, 1)
	go func() { slow <- send(t, "POST", in.url+"/tools/sleep/execute", `{"ms":1500}`) }()
	// The load: calls in a loop, bounded in count and time.
	var ok, failed atomic.Int64
	var failures sync.Map
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var once sync.Once
	halt := func() { once.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := send(t, "POST", in.url+"/tools/echo/execute", fmt.Sprintf(`{"message":"n%d"}`, w*10000+i))
				if r.status == 200 && r.env.Status == "success" && strings.Contains(string(r.env.Data), fmt.Sprintf(`"n%d"`, w*10000+i)) {
					ok.Add(1)
				} else {
					failed.Add(1)
					failures.Store(string(r.body), r.status)
				}
			}
		}()
	}
	// Wait until the sleep call is running (its slot taken) before the reload.
	deadline := time.Now().Add(5 * time.Second)
	for metricValue(t, in.admin, `toold_tool_in_flight{tool="sleep"}`) != "1" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}

	writeFile(t, path, reloadConfigText(ws, stampTool))
	r := send(t, "POST", in.url+"/admin/reload", "")
	if r.status != 200 {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	var res ReloadResult
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"stamp"}) || !slices.Equal(res.Removed, []string{"sleep"}) || !res.Changed ||
		!strings.HasPrefix(res.Hash, "sha256:") {
		t.Errorf("reload said %+v: want stamp added, sleep removed", res)
	}
	if s := <-slow; s.status != 200 || s.env.Status != "success" {
		t.Errorf("the removed tool's call in flight: %d %s", s.status, s.body)
	}
	if listed(t, in.url, "sleep") || !listed(t, in.url, "stamp") {
		t.Error("after the reload the listing still has sleep, or not stamp")
	}
	if r := send(t, "POST", in.url+"/tools/sleep/execute", `{"ms":1}`); r.status != 404 {
		t.Errorf("a call of the removed tool: %d %s", r.status, r.body)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the MCP client never heard notifications/tools/list_changed")
	}
	tl, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tl.Tools, func(tool *mcp.Tool) bool { return tool.Name == "stamp" }) {
		t.Error("the MCP client does not see the added tool")
	}

	// A bad file: refused, counted, logged; the old configuration serves.
	writeFile(t, path, "tools: [\n")
	if r := send(t, "POST", in.url+"/admin/reload", ""); r.status != 422 || r.env.Error == nil || r.env.Error.Code != "invalid_config" {
		t.Errorf("a bad file: %d %s", r.status, r.body)
	}
	if got := metricValue(t, in.admin, `toold_config_reloads_total{result="error"}`); got != "1" {
		t.Errorf("toold_config_reloads_total{result=\"error\"} = %q, want 1", got)
	}
	if !strings.Contains(in.stderr.String(), "the configuration was not reloaded") {
		t.Error("the refused file is not in the log")
	}
	if !listed(t, in.url, "stamp") {
		t.Error("the bad file changed what is served")
	}
	// A file changing what only a restart applies: refused, naming it.
	writeFile(t, path, reloadConfigText(ws, "state: {retention: 1h}\n"))
	if r := send(t, "POST", in.url+"/admin/reload", ""); r.status != 409 || r.env.Error == nil || r.env.Error.Code != "restart_needed" ||
		!strings.Contains(r.env.Error.Message, "state.retention") {
		t.Errorf("a setting only a restart applies: %d %s", r.status, r.body)
	}

	// SIGHUP: sleep comes back.
	writeFile(t, path, reloadConfigText(ws, sleepOn))
	if runtime.GOOS == "windows" { // no SIGHUP to send: the request does it
		send(t, "POST", in.url+"/admin/reload", "")
	} else if self, _ := os.FindProcess(os.Getpid()); self.Signal(syscall.SIGHUP) != nil {
		t.Fatal("SIGHUP could not be sent")
	}
	waitListed(t, in.url, "sleep", true)
	waitListed(t, in.url, "stamp", false)

	halt()
	if failed.Load() != 0 || ok.Load() == 0 {
		failures.Range(func(k, v any) bool { t.Logf("failed: %v %s", v, k); return true })
		t.Errorf("calls through the reloads: %d ok, %d failed", ok.Load(), failed.Load())
	}
	if got := metricValue(t, in.admin, `toold_config_reloads_total{result="ok"}`); got != "2" {
		t.Errorf("toold_config_reloads_total{result=\"ok\"} = %q, want 2", got)
	}
	if !auditHas(t, in.url, regexp.MustCompile(`"action":"reload_config"[^}]*"target":"`+regexp.QuoteMeta(res.Hash)+`"`)) {
		t.Error("the audit log has no reload_config record with the file's hash")
	}
}

// auditHas pages through the whole audit log for a record matching re,
// waiting for the log to be written (it is flushed in blocks).
func auditHas(t *testing.T, url string, re *regexp.Regexp) bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		after := ""
		for range 1000 {
			a := send(t, "GET", url+"/audit?limit=100"+after, "")
			if re.Match(a.body) {
				return true
			}
			var page struct{ Next string }
			_ = json.Unmarshal(a.body, &page)
			if page.Next == "" || a.status != 200 || "&after="+page.Next == after {
				break
			}
			after = "&after=" + page.Next
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// TestReloadWatch: with -watch, writing the file reloads it.
func TestReloadWatch(t *testing.T) {
	ws := workspace(t)
	path := filepath.Join(t.TempDir(), "toold.yaml")
	writeFile(t, path, reloadConfigText(ws, ""))
	in := start(t, nil, "-config", path, "-watch")
	if listed(t, in.url, "sleep") {
		t.Fatal("sleep is listed before the change")
	}
	// An editor's way: write a new file, rename it over the old one.
	tmp := path + ".new"
	writeFile(t, tmp, reloadConfigText(ws, sleepOn))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitListed(t, in.url, "sleep", true)
	writeFile(t, path, "tools: [\n") // in place, and bad: refused
	deadline := time.Now().Add(10 * time.Second)
	for metricValue(t, in.admin, `toold_config_reloads_total{result="error"}`) != "1" {
		if time.Now().After(deadline) {
			t.Fatal("the bad file written in place was never refused")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !listed(t, in.url, "sleep") {
		t.Error("the bad file changed what is served")
	}
}

// TestReloadEveryReplica: two replicas on one NATS, each with its own
// file; one toold reload reloads both.
func TestReloadEveryReplica(t *testing.T) {
	t.Setenv("TOOLD_AUDIT_SIGNING_KEY", strings.Repeat("a5", 32)) // the replicas' shared key
	ns := statetest.StartServer(t)
	cfg := func(name string) string {
		return fmt.Sprintf("state:\n  replica: %s\n  nats: {url: %q}\ntools:\n  echo: {enabled: true}\n", name, ns.URL)
	}
	a := startProcess(t, cfg("replica-a"))
	b := startProcess(t, cfg("replica-b"))
	for _, p := range []*proc{a, b} {
		path := p.cmd.Args[2] // -config FILE
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, string(data)+"  sleep: {enabled: true}\n")
		if listed(t, p.url, "sleep") {
			t.Fatal("sleep is listed before the reload")
		}
	}
	var out, errOut strings.Builder
	if err := run(context.Background(), []string{"reload", "-nats-url", ns.URL}, func(string) (string, bool) { return "", false },
		strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("toold reload: %v\n%s", err, errOut.String())
	}
	for _, p := range []*proc{a, b} {
		waitListed(t, p.url, "sleep", true)
	}
}

// countingUpstream is a hosted MCP server (the go-sdk's, over Streamable
// HTTP on loopback) that counts the sessions opened on it.
type countingUpstream struct {
	url      string
	sessions atomic.Int64
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "counting", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greet", Description: "Greets someone by name.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
			u.sessions.Add(1) // an initialize: a new session
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	u.url = hs.URL + "/mcp"
	return u
}

func serverDecl(name, url string) string {
	return fmt.Sprintf("    - {name: %s, url: %q, allow: [127.0.0.1], allow_http: true}\n", name, url)
}

// TestReloadKeepsUnchangedServers: a reload that removes one hosted MCP
// server and adds another leaves the unchanged one's session as it was.
func TestReloadKeepsUnchangedServers(t *testing.T) {
	kept, gone, added := newCountingUpstream(t), newCountingUpstream(t), newCountingUpstream(t)
	ws := workspace(t)
	path := filepath.Join(t.TempDir(), "toold.yaml")
	writeFile(t, path, reloadConfigText(ws, "mcp:\n  servers:\n"+serverDecl("kept", kept.url)+serverDecl("gone", gone.url)))
	in := start(t, nil, "-config", path)
	waitListed(t, in.url, "kept.greet", true)
	waitListed(t, in.url, "gone.greet", true)
	before := kept.sessions.Load()

	writeFile(t, path, reloadConfigText(ws, "mcp:\n  servers:\n"+serverDecl("kept", kept.url)+serverDecl("added", added.url)))
	r := send(t, "POST", in.url+"/admin/reload", "")
	var res ReloadResult
	if err := json.Unmarshal(r.body, &res); r.status != 200 || err != nil {
		t.Fatalf("reload: %d %s", r.status, r.body)
	}
	if !slices.Equal(res.ServersStopped, []string{"gone"}) || !slices.Equal(res.ServersStarted, []string{"added"}) {
		t.Errorf("reload said %+v: want gone stopped, added started", res)
	}
	waitListed(t, in.url, "added.greet", true)
	waitListed(t, in.url, "gone.greet", false)
	if code, env := in.exec("kept.greet", `{"name":"x"}`); code != 200 || !strings.Contains(mustJSON(env), "hello x") {
		t.Errorf("the kept server's tool after the reload: %d %s", code, mustJSON(env))
	}
	if n := kept.sessions.Load(); n != before {
		t.Errorf("the unchanged server was connected again: %d sessions before the reload, %d after", before, n)
	}
	// A bad declaration: refused, and nothing changes.
	writeFile(t, path, reloadConfigText(ws, "mcp:\n  servers:\n"+serverDecl("kept", kept.url)+serverDecl("kept", added.url)))
	if r := send(t, "POST", in.url+"/admin/reload", ""); r.status != 422 {
		t.Errorf("two servers of one name: %d %s", r.status, r.body)
	}
	if !listed(t, in.url, "added.greet") || !listed(t, in.url, "kept.greet") {
		t.Error("a refused declaration changed the servers")
	}
}
