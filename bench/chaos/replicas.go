//go:build linux

package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// Keys the load uses: the agent calls, the approver decides and reads
// the audit log. Fixed, since every process of one run must agree.
const (
	agentKey    = "toold_chaos_agent_key_0123456789abcdef"
	approverKey = "toold_chaos_approver_key_0123456789abcdef"
)

// heartbeat is the replicas' executions.heartbeat: a replica silent for
// three of them has lost its executions to the others.
const heartbeat = time.Second

func keyHash(k string) string {
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:])
}

// replica is one toold process of the run.
type replica struct {
	name, bin, dir string
	config         string
	cmd            *exec.Cmd
	url            string
	admin          string // http://host:port of its admin listener (metrics, pprof)
	exited         chan struct{}
	generation     int // how many times it was started
}

// toolConfig is every replica's configuration: the cluster with three
// copies of each stream, limits a small node can hold, the heartbeat, and
// the tools the load calls:
//   - echo and sleep (idempotent), request_user_input (waits for an answer);
//   - mark, a command that is not idempotent and appends its token to
//     marks (one line per run, so runs can be counted), and the same
//     command under the name approved_mark, which waits for a person.
func toolConfig(url, name, workspace, marks, keyFile string) string {
	return fmt.Sprintf(`workspace: %s
log_level: info
server: {pprof: true}
auth:
  keys:
    - {name: agent, sha256: %s, tools: ["*"], roles: [call]}
    - {name: approver, sha256: %s, tools: ["*"], roles: [call, approve, admin, observe]}
state:
  replica: %s
  nats: {url: %q, replicas: 3}
  events: {max_bytes: 33554432}
  audit: {max_bytes: 33554432, signing_key_file: %q}
  artifacts: {max_bytes: 16777216}
executions: {heartbeat: %s, idempotency_wait: 5s}
tools:
  echo: {enabled: true}
  sleep: {enabled: true, limits: {max_in_flight: 200, max_queue: 1000}}
  request_user_input: {enabled: true}
  mark: {limits: {max_in_flight: 100, max_queue: 1000, timeout: 20s}}
  approved_mark: {confirmation: human, limits: {max_in_flight: 100, max_queue: 1000, timeout: 20s}}
commands:
  containment: none
  tools:
    - name: mark
      description: Appends its token to a file and sleeps, standing in for a command with an effect.
      parameters: %[8]s
      argv: %[9]s
    - name: approved_mark
      description: The same, once a person approved it.
      parameters: %[8]s
      argv: %[9]s
`, workspace, keyHash(agentKey), keyHash(approverKey), name, url, keyFile, heartbeat, markParams, markArgv(marks))
}

// markParams and markArgv declare the mark commands (YAML flow style).
const markParams = `{type: object, properties: {token: {type: string, pattern: "^[a-z0-9-]{1,40}$"}, ` +
	`seconds: {type: string, pattern: "^[0-9]{1,2}(\\.[0-9]{1,3})?$"}}, required: [token, seconds], additionalProperties: false}`

func markArgv(marks string) string {
	return fmt.Sprintf(`[sh, -c, 'echo "$0" >> %s; sleep "$1"', "{{.token}}", "{{.seconds}}"]`, marks)
}

func newReplica(name, bin, dir, config string) *replica {
	return &replica{name: name, bin: bin, dir: dir, config: config}
}

// start runs toold and waits until it serves.
func (r *replica) start() error {
	cfg := filepath.Join(r.dir, r.name+".yaml")
	if err := os.WriteFile(cfg, []byte(r.config), 0o600); err != nil {
		return err
	}
	r.generation++
	logf, err := os.Create(filepath.Join(r.dir, fmt.Sprintf("%s.%d.log", r.name, r.generation)))
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, "-config", cfg, "-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0")
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.exited = cmd, make(chan struct{})
	found := make(chan [2]string, 1)
	go func() {
		re := regexp.MustCompile(`http://[0-9.]+:[0-9]+`)
		sc := bufio.NewScanner(out)
		var urls [2]string
		sent := false
		for sc.Scan() { // to the end: a full pipe would stop toold
			switch {
			case strings.Contains(sc.Text(), "listening on"):
				urls[0] = re.FindString(sc.Text())
			case strings.Contains(sc.Text(), "metrics on"):
				urls[1] = re.FindString(sc.Text())
			}
			if !sent && urls[0] != "" && urls[1] != "" {
				found <- urls
				sent = true
			}
		}
	}()
	go func() { _ = cmd.Wait(); logf.Close(); close(r.exited) }()
	select {
	case u := <-found:
		r.url, r.admin = u[0], u[1]
		return nil
	case <-r.exited:
		return fmt.Errorf("toold %s exited before serving; see %s", r.name, logf.Name())
	case <-time.After(45 * time.Second):
		r.kill()
		return fmt.Errorf("toold %s did not serve within 45s; see %s", r.name, logf.Name())
	}
}

// kill ends it at once (SIGKILL): no drain, nothing flushed.
func (r *replica) kill() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies only once it runs
	_ = r.cmd.Process.Kill()
	<-r.exited
	r.cmd = nil
}

// stop ends it as an orchestrator would (SIGTERM, the drain), bounded.
func (r *replica) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

// pause and resume stop and continue the process (SIGSTOP, SIGCONT).
func (r *replica) pause() error  { return r.cmd.Process.Signal(syscall.SIGSTOP) }
func (r *replica) resume() error { return r.cmd.Process.Signal(syscall.SIGCONT) }
