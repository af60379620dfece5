package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/config"
)

// instance is a toold started by run() in this process, on loopback port 0.
type instance struct {
	t      *testing.T
	url    string
	admin  string
	stdout *syncBuffer
	stderr *syncBuffer
	stop   context.CancelFunc
	done   chan error
	client *http.Client
}

var listenLine = regexp.MustCompile(`listening on (http://\S+),`)
var adminLine = regexp.MustCompile(`metrics on (http://\S+)/metrics`)

func start(t *testing.T, env map[string]string, args ...string) *instance {
	t.Helper()
	return startArgs(t, env, append([]string{"-state-dir", t.TempDir()}, args...)...)
}

// startArgs is start without a state directory of the test's own: the
// instance finds its default.
func startArgs(t *testing.T, env map[string]string, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{t: t, stdout: &syncBuffer{}, stderr: &syncBuffer{}, stop: cancel, done: make(chan error, 1),
		client: &http.Client{Transport: apitest.Checker(t, http.DefaultTransport), Timeout: 10 * time.Second}}
	args = append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0"}, args...)
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	go func() { in.done <- run(ctx, args, lookup, strings.NewReader(""), in.stdout, in.stderr) }()
	m, err := in.stdout.await(listenLine, 10*time.Second, in.done)
	if m == nil {
		t.Fatalf("toold did not start (exit: %v)\nstdout: %s\nstderr: %s", err, in.stdout, in.stderr)
	}
	in.url = m[1]
	if a := adminLine.FindStringSubmatch(in.stdout.String()); a != nil {
		in.admin = a[1]
	}
	t.Cleanup(func() { in.shutdown() })
	return in
}

func (in *instance) shutdown() error {
	in.stop()
	select {
	case err := <-in.done:
		in.done <- err
		return err
	case <-time.After(40 * time.Second):
		in.t.Fatal("toold did not stop")
		return nil
	}
}

func (in *instance) get(path string) (int, []byte) {
	in.t.Helper()
	resp, err := in.client.Get(in.url + path)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (in *instance) exec(tool, body string) (int, map[string]any) {
	in.t.Helper()
	resp, err := in.client.Post(in.url+"/tools/"+tool+"/execute", "application/json", strings.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		in.t.Fatal(err)
	}
	return resp.StatusCode, env
}

func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hello\nworld\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDefaultService is the README's curl session against the default
// configuration: all five listings, a read, and every hostile path refused.
func TestDefaultService(t *testing.T) {
	ws := workspace(t)
	outside := filepath.Join(filepath.Dir(ws), "outside-"+filepath.Base(ws))
	if err := os.WriteFile(outside, []byte("SECRET-OUTSIDE"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(outside) })
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	in := start(t, nil, "-workspace", ws)
	if !strings.Contains(in.stdout.String(), "serving 4 tools") {
		t.Errorf("start-up line: %s", in.stdout)
	}
	for _, f := range []string{"", "?format=native", "?format=openai", "?format=anthropic", "?format=mcp", "?format=prompt"} {
		code, body := in.get("/tools" + f)
		if code != 200 || !bytes.Contains(body, []byte("read_file")) || offByDefault.Match(body) {
			t.Errorf("GET /tools%s: %d %.200s", f, code, body)
		}
	}
	code, env := in.exec("read_file", `{"paths":["hello.txt"]}`)
	if code != 200 || env["success"] != true || !strings.Contains(mustJSON(env["data"]), `2\tworld`) {
		t.Fatalf("read_file: %d %v", code, env)
	}
	for _, p := range []string{"../" + filepath.Base(outside), outside, "a/../../x", "link", "nul\x00byte", strings.Repeat("a/", 3000)} {
		code, env := in.exec("read_file", mustJSON(map[string]any{"paths": []string{p}}))
		e, _ := env["error"].(map[string]any)
		if code != 403 || e["type"] != "security_error" || strings.Contains(mustJSON(env), "SECRET-OUTSIDE") {
			t.Errorf("hostile path %.40q: %d %v", p, code, env)
		}
	}
	code, env = in.exec("write_file", `{"path":"x","content":"y"}`)
	if code != 404 {
		t.Errorf("write_file is on by default: %d %v", code, env)
	}
}

// offByDefault finds a listed tool that the default config keeps off.
var offByDefault = regexp.MustCompile("\"name\":\\s*\"(write_file|edit_file|echo|sleep)\"|Tool: `(write_file|edit_file|echo|sleep)`")

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestMetricsExported(t *testing.T) {
	in := start(t, nil, "-workspace", workspace(t))
	in.exec("read_file", `{"paths":["hello.txt"]}`)
	resp, err := http.Get(in.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, name := range []string{
		`toold_tool_execution_duration_seconds_bucket{category="direct",status="success",tool="read_file",le="0.5"}`,
		`toold_tool_phase_duration_seconds_count{phase="execute",tool="read_file"}`,
		`toold_tool_latency_target_seconds{bound="target",category="direct",tool="read_file"} 0.5`,
		`toold_tool_latency_target_seconds{bound="timeout",category="direct",tool="read_file"} 5`,
		`toold_tool_in_flight{tool="read_file"} 0`, `toold_tool_queue_depth{tool="grep"} 0`,
		`toold_tool_capacity{kind="in_flight",tool="read_file"} 10`, `toold_tool_capacity{kind="queue",tool="read_file"} 100`,
		`toold_tool_rejections_total{reason="queue_full",tool="read_file"} 0`,
		`toold_tool_calls_total{status="success",tool="read_file"} 1`, `toold_tool_stuck{tool="read_file"} 0`,
		`toold_http_requests_total{code="200",method="POST",route="/tools/{name}/execute"} 1`,
		`toold_build_info{`, `go_goroutines`, `process_resident_memory_bytes`,
		`toold_store_connected 1`, `toold_store_operation_duration_seconds_count{op="provision"} 1`,
		`toold_executions_total{status="pending"} 0`, `toold_events_dropped_total{kind="audit"} 0`,
		`toold_events_published_total`, `toold_audit_records_total`,
	} {
		if !bytes.Contains(body, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	if code, _ := in.get("/metrics"); code != 404 {
		t.Errorf("/metrics served on the API listener: %d", code)
	}
}

func TestEnvEquivalents(t *testing.T) {
	ws := workspace(t)
	in := start(t, map[string]string{"TOOLD_WORKSPACE": ws, "TOOLD_LOG_LEVEL": "warn"})
	if !strings.Contains(in.stdout.String(), ws) {
		t.Errorf("TOOLD_WORKSPACE ignored: %s", in.stdout)
	}
	in.get("/tools")
	in.shutdown()
	if strings.Contains(in.stderr.String(), `"msg":"request"`) {
		t.Errorf("TOOLD_LOG_LEVEL=warn ignored: %s", in.stderr)
	}
}

func TestRefusesNonLoopbackWithoutAuth(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"-listen", "0.0.0.0:0"}, func(string) (string, bool) { return "", false },
		strings.NewReader(""), &out, &errOut)
	if err == nil || !strings.Contains(errOut.String(), "not a loopback address") {
		t.Fatalf("err %v, stderr %s", err, errOut.String())
	}
}

func TestInsecureNoAuthWarns(t *testing.T) {
	in := start(t, nil, "-workspace", workspace(t), "-listen", "0.0.0.0:0", "-insecure-no-auth")
	// The warning follows the lines start waits for.
	if m, _ := in.stdout.await(regexp.MustCompile("WARNING"), 5*time.Second, nil); m == nil {
		t.Fatalf("no warning: %s", in.stdout)
	}
}

func TestCheckConfig(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir() // the configuration lies outside the workspace
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("workspace: "+ws+"\ntools: {write_file: {enabled: true}}\n"), 0o644)
	os.WriteFile(bad, []byte("workspace: "+ws+"\nlog_level: loud\ntools: {wirte_file: {enabled: true}}\nserver: {max_body_bytes: -5}\n"), 0o644)
	var out, errOut bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	if err := run(context.Background(), []string{"-check-config", good}, noEnv, nil, &out, &errOut); err != nil {
		t.Fatalf("good config: %v %s", err, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	err := run(context.Background(), []string{"-check-config", bad}, noEnv, nil, &out, &errOut)
	if ec, ok := err.(exitCode); !ok || ec == 0 {
		t.Fatalf("bad config: %v", err)
	}
	for _, want := range []string{"log_level: ", "server.max_body_bytes: "} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	// An unknown tool is reported once the rest is right.
	os.WriteFile(bad, []byte("workspace: "+ws+"\ntools: {wirte_file: {enabled: true}}\n"), 0o644)
	errOut.Reset()
	run(context.Background(), []string{"-check-config", bad}, noEnv, nil, &out, &errOut)
	if !strings.Contains(errOut.String(), "tools.wirte_file: no such tool") {
		t.Errorf("unknown tool not reported: %s", errOut.String())
	}
}

func TestHashKey(t *testing.T) {
	var out bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	if err := run(context.Background(), []string{"-hash-key"}, noEnv, strings.NewReader("correct-horse-battery\n"), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	// sha256("correct-horse-battery")
	if got := strings.TrimSpace(out.String()); len(got) != 64 {
		t.Errorf("hash %q", got)
	}
	if err := run(context.Background(), []string{"-hash-key"}, noEnv, strings.NewReader("short\n"), io.Discard, io.Discard); err == nil {
		t.Errorf("a short key was hashed")
	}
	out.Reset()
	if err := run(context.Background(), []string{"-new-key"}, noEnv, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	var key, hash string
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		switch k {
		case "key":
			key = strings.TrimSpace(v)
		case "sha256":
			hash = strings.TrimSpace(v)
		}
	}
	var again bytes.Buffer
	run(context.Background(), []string{"-hash-key"}, noEnv, strings.NewReader(key), &again, io.Discard)
	if strings.TrimSpace(again.String()) != hash || !strings.HasPrefix(key, "toold_") {
		t.Errorf("-new-key printed %q / %q; -hash-key gives %q", key, hash, again.String())
	}
}

// BenchmarkStartup measures start-up to a served /healthz: open the
// embedded store, build every tool, compile every schema, listen, answer.
func BenchmarkStartup(b *testing.B) {
	ws := b.TempDir()
	noEnv := func(string) (string, bool) { return "", false }
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncBuffer{}
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-admin-listen", "off", "-workspace", ws, "-log-level", "error", "-state-dir", b.TempDir()},
				noEnv, nil, out, io.Discard)
		}()
		m, _ := out.await(listenLine, 10*time.Second, done)
		if m == nil {
			b.Fatal("toold did not start")
		}
		resp, err := http.Get(m[1] + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(err)
		}
		resp.Body.Close()
		b.StopTimer() // shutting down (the store flushes and closes) is not start-up
		cancel()
		<-done
		b.StartTimer()
	}
}

// TestExamplesAreValid: every example configuration passes -check-config,
// which builds every tool it declares.
func TestExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob("../../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples found")
	}
	noEnv := func(string) (string, bool) { return "", false }
	for _, f := range files {
		var errOut bytes.Buffer
		if err := run(context.Background(), []string{"-check-config", f, "-workspace", t.TempDir()}, noEnv, nil, io.Discard, &errOut); err != nil {
			t.Errorf("%s: %v\n%s", f, err, errOut.String())
		}
	}
}

// TestSettingFlagsApply: every setting flag (and its TOOLD_ variable)
// reaches the configuration toold runs with.
func TestSettingFlagsApply(t *testing.T) {
	o, err := parseFlags([]string{"-listen", "127.0.0.1:1", "-admin-listen", "off", "-workspace", "/w", "-log-level", "debug",
		"-insecure-no-auth", "-drain-grace", "7s"}, func(string) (string, bool) { return "", false }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	o.apply(c)
	if c.Listen != "127.0.0.1:1" || c.AdminListen != "" || c.Workspace != "/w" || c.LogLevel != "debug" ||
		!c.InsecureNoAuth || c.Server.DrainGrace != 7*time.Second {
		t.Errorf("flags not applied: %+v", c)
	}
	o, err = parseFlags(nil, func(k string) (string, bool) {
		v, ok := map[string]string{"TOOLD_DRAIN_GRACE": "9s", "TOOLD_LISTEN": "127.0.0.1:2"}[k]
		return v, ok
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	c = config.Default()
	o.apply(c)
	if c.Listen != "127.0.0.1:2" || c.Server.DrainGrace != 9*time.Second {
		t.Errorf("environment not applied: listen %q, grace %v", c.Listen, c.Server.DrainGrace)
	}
}

// TestBadSettingsSayWhy: a setting toold refuses at start is named on
// stderr, whether it came as a flag, a variable or a stray argument.
func TestBadSettingsSayWhy(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"variable", nil, map[string]string{"TOOLD_DRAIN_GRACE": "bogus"}, "TOOLD_DRAIN_GRACE"},
		{"flag", []string{"-drain-grace", "bogus"}, nil, "drain-grace"},
		{"argument", []string{"serve"}, nil, "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr strings.Builder
			err := run(context.Background(), tc.args, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok },
				strings.NewReader(""), io.Discard, &stderr)
			if err == nil || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("err %v, stderr %q: want it to name %s", err, stderr.String(), tc.want)
			}
		})
	}
}

// TestCheckConfigListsEveryProblem: one pass of -check-config lists the
// problems of every stage: the settings' rules, the command tools and the
// HTTP tools, not only the first stage that has one.
func TestCheckConfigListsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("workspace: "+t.TempDir()+`
log_level: loud
commands:
  tools:
    - {name: "bad name", description: x, argv: ["true"]}
http:
  tools:
    - {name: h1, description: d, request: {url: "ftp://example.com/"}}
tools:
  wirte_file: {enabled: true}
  h1: {limits: {timeout: 3s}}
  consult_many: {limits: {timeout: 3s}}
`), 0o644)
	var out, errOut bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	err := run(context.Background(), []string{"-check-config", bad}, noEnv, nil, &out, &errOut)
	if ec, ok := err.(exitCode); !ok || ec == 0 {
		t.Fatalf("bad config: %v", err)
	}
	for _, want := range []string{"log_level: ", `commands: command tool "bad name"`, `http.tools[0]: h1: request.url`,
		"tools.wirte_file: no such tool"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	// The tools of a family that failed to build are no unknown names.
	for _, unwanted := range []string{"tools.h1:", "tools.consult_many:"} {
		if strings.Contains(errOut.String(), unwanted) {
			t.Errorf("stderr has %q:\n%s", unwanted, errOut.String())
		}
	}
}

// TestLatencyMeasured: GET /latency reports each tool's measured calls,
// p50 and p99 beside its documented target and max (the console's tools
// view shows them).
func TestLatencyMeasured(t *testing.T) {
	in := start(t, nil, "-workspace", workspace(t))
	for range 5 {
		if code, env := in.exec("read_file", `{"paths":["hello.txt"]}`); code != 200 {
			t.Fatalf("read_file: %d %v", code, env)
		}
	}
	code, body := in.get("/latency")
	if code != 200 {
		t.Fatalf("/latency: %d %s", code, body)
	}
	var raw struct {
		Tools map[string]map[string]float64
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	rf := raw.Tools["read_file"]
	if rf["calls"] != 5 || rf["p50_ms"] <= 0 || rf["p99_ms"] < rf["p50_ms"] || rf["target_ms"] <= 0 || rf["max_ms"] < rf["target_ms"] {
		t.Fatalf("read_file's measurement: %v (%s)", rf, body)
	}
	if g := raw.Tools["grep"]; g == nil || g["calls"] != 0 {
		t.Fatalf("grep, never called: %v", g)
	}
}
