package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildToold builds the real binary once for the tests that signal it.
var buildToold = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toold-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "toold")
	if runtime.GOOS == "windows" {
		bin += ".exe" // what os/exec starts there
	}
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// proc is a toold process.
type proc struct {
	cmd   *exec.Cmd
	url   string
	admin string
	exit  chan error
}

// startProcess starts the built toold with config (after a workspace line)
// and extra flags.
func startProcess(t *testing.T, config string, extra ...string) *proc {
	t.Helper()
	bin, err := buildToold()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // the configuration and the state, outside the workspace
	cfg := filepath.Join(dir, "toold.yaml")
	if err := os.WriteFile(cfg, []byte("workspace: "+t.TempDir()+"\n"+config), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-config", cfg, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-level", "warn",
		"-state-dir", filepath.Join(dir, "state")}, extra...)...)
	return launchProcess(t, cmd)
}

// launchProcess starts cmd, a toold listening on two ports, and waits
// until it says where.
func launchProcess(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, exit: make(chan error, 1)}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := linesOf(stdout)
	re := regexp.MustCompile(`http://[0-9.:]+`)
	timeout := time.After(20 * time.Second)
	for p.url == "" || p.admin == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("toold exited before listening")
			}
			if strings.Contains(line, "listening on") {
				p.url = re.FindString(line)
			}
			if strings.Contains(line, "metrics on") {
				p.admin = re.FindString(line)
			}
		case <-timeout:
			t.Fatal("toold did not start")
		}
	}
	go func() {
		for range lines {
		}
	}()
	go func() { p.exit <- cmd.Wait() }()
	return p
}

// gauge reads one sample from the admin listener's /metrics.
func (p *proc) gauge(t *testing.T, series string) string {
	resp, err := http.Get(p.admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return strings.TrimPrefix(line, series+" ")
		}
	}
	return ""
}

func (p *proc) waitGauge(t *testing.T, series, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for p.gauge(t, series) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s never reached %s (is %s)", series, want, p.gauge(t, series))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type answer struct {
	status int
	env    struct {
		Status  string
		Success bool
		Error   *struct{ Type, Code string }
	}
	err error
}

func (p *proc) call(body string) answer {
	var a answer
	resp, err := http.Post(p.url+"/tools/sleep/execute", "application/json", strings.NewReader(body))
	if err != nil {
		a.err = err
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	a.err = json.NewDecoder(resp.Body).Decode(&a.env)
	return a
}

// callsInFlight starts n calls and returns their answers' channel.
func (p *proc) callsInFlight(n int, body string) chan answer {
	out := make(chan answer, n)
	for range n {
		go func() { out <- p.call(body) }()
	}
	return out
}

// TestDrainFinishesAcceptedCalls: SIGTERM with calls running and queued;
// readiness turns 503 at once, new calls are refused with 503 draining,
// every accepted call finishes with its result, and toold exits 0.
func TestDrainFinishesAcceptedCalls(t *testing.T) {
	p := startProcess(t, "server: {drain_grace: 10s}\ntools:\n  sleep: {enabled: true, limits: {max_in_flight: 2, max_queue: 5}}\n")
	answers := p.callsInFlight(5, `{"ms":400}`)
	p.waitGauge(t, `toold_tool_in_flight{tool="sleep"}`, "2")
	p.waitGauge(t, `toold_tool_queue_depth{tool="sleep"}`, "3")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		resp, err := http.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 503 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not turn 503 after SIGTERM")
		}
		time.Sleep(time.Millisecond)
	}
	if late := p.call(`{"ms":1}`); late.status != 503 || late.env.Error == nil || late.env.Error.Code != "draining" {
		t.Errorf("a call after SIGTERM: %d %+v %v", late.status, late.env, late.err)
	}
	for range 5 {
		a := <-answers
		if a.err != nil || a.status != 200 || !a.env.Success {
			t.Errorf("an accepted call was not finished: %d %+v %v", a.status, a.env, a.err)
		}
	}
	select {
	case err := <-p.exit:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("toold did not exit")
	}
}

// TestDrainGraceExpires: calls that outlast the grace period are cancelled
// and still each get an envelope (503 draining); toold exits 0.
func TestDrainGraceExpires(t *testing.T) {
	p := startProcess(t, "server: {drain_grace: 300ms}\ntools:\n  sleep: {enabled: true, limits: {max_in_flight: 2, max_queue: 5, timeout: 30s, max: 30s}}\n")
	answers := p.callsInFlight(4, `{"ms":20000}`)
	p.waitGauge(t, `toold_tool_in_flight{tool="sleep"}`, "2")
	p.waitGauge(t, `toold_tool_queue_depth{tool="sleep"}`, "2")
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		a := <-answers
		if a.err != nil || a.status != 503 || a.env.Error == nil || a.env.Error.Code != "draining" {
			t.Errorf("call cut by the grace period: %d %+v %v", a.status, a.env, a.err)
		}
	}
	if err := <-p.exit; err != nil {
		t.Fatalf("exit: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("drain took %v with a 300ms grace", d)
	}
}

// TestDrainCancelsMCPCalls: an MCP call still running when the grace ends
// is cancelled like a REST one and answered (isError, draining), and a
// new MCP request during the drain is refused with 503.
func TestDrainCancelsMCPCalls(t *testing.T) {
	p := startProcess(t, "server: {drain_grace: 300ms}\ntools:\n  sleep: {enabled: true, limits: {timeout: 30s, max: 30s}}\n")
	post := func(body string) (int, string, error) {
		req, _ := http.NewRequest(http.MethodPost, p.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	type reply struct {
		status int
		body   string
		err    error
	}
	done := make(chan reply, 1)
	go func() {
		s, b, err := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":20000}}}`)
		done <- reply{s, b, err}
	}()
	p.waitGauge(t, `toold_tool_in_flight{tool="sleep"}`, "1")
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitGauge(t, "toold_ready", "0")
	if s, b, err := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); err != nil || s != 503 || !strings.Contains(b, "shutting down") {
		t.Errorf("a new MCP request while draining: %d %s %v", s, b, err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"isError":true`) || !strings.Contains(r.body, `draining`) {
			t.Errorf("the MCP call cut by the grace: %d %s %v", r.status, r.body, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the MCP call was not answered after the grace")
	}
	if err := <-p.exit; err != nil {
		t.Fatalf("exit: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("drain took %v with a 300ms grace", d)
	}
}
