package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/state/statetest"
)

// replicaConfig is two real toold processes' config on one external NATS:
// echo and sleep (idempotent), and slow_write, a command that is not.
func replicaConfig(natsURL, name string) string {
	return fmt.Sprintf(`
state:
  replica: %s
  nats: {url: %q}
executions: {heartbeat: 300ms, idempotency_wait: 5s}
# No keys: the test, the one local caller, approves too.
approvals: {self_approval: true}
tools:
  echo: {enabled: true}
  sleep: {enabled: true, limits: {max_in_flight: 50, max_queue: 500}}
  request_user_input: {enabled: true}
  stamp: {confirmation: human}
commands:
  containment: none
  tools:
    - name: stamp
      description: Prints a stamp, standing in for a command a person must approve.
      argv: [echo, stamped]
    - name: slow_write
      description: Sleeps, standing in for a command with side effects.
      parameters:
        type: object
        properties: {seconds: {type: integer, minimum: 1, maximum: 20}}
        required: [seconds]
        additionalProperties: false
      argv: [sleep, "{{.seconds}}"]
`, name, natsURL)
}

type httpAnswer struct {
	status int
	header http.Header
	body   []byte
	env    struct {
		Status      string
		ExecutionID string `json:"execution_id"`
		Data        json.RawMessage
		Error       *struct{ Type, Code, Message, Suggestion string }
	}
}

// send makes one request to a replica, checked against the contract.
func send(t *testing.T, method, url, body string, header ...string) *httpAnswer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := &http.Client{Transport: apitest.Checker(t, http.DefaultTransport), Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	a := &httpAnswer{status: resp.StatusCode, header: resp.Header}
	a.body, _ = io.ReadAll(resp.Body)
	_ = json.Unmarshal(a.body, &a.env)
	return a
}

// sseEvents reads events of a stream until stop says so (or 10s pass).
func sseEvents(t *testing.T, url string, stop func(name, data string) bool, bearer ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	for _, b := range bearer {
		req.Header.Set("Authorization", "Bearer "+b)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var names []string
	name := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			names = append(names, name)
			if stop(name, data) {
				break
			}
		}
	}
	return names
}

// TestTwoReplicasOneNATS is the scaled-out proof with real processes: two
// toold replicas and one nats-server. An execution submitted on A is read,
// streamed and cancelled on B; an idempotency key used on A replays on B;
// B's activity stream shows A's calls; A killed mid-execution loses its
// executions to B (interrupted, or run again when idempotent); and a NATS
// restart under load loses nothing accepted.
func TestTwoReplicasOneNATS(t *testing.T) {
	// The replicas (child processes) sign the audit log with one key.
	t.Setenv("TOOLD_AUDIT_SIGNING_KEY", strings.Repeat("a5", 32))
	ns := statetest.StartServer(t)
	ws := sharedWorkspace(t) // readable by the uid commands run as
	a := startProcess(t, replicaConfig(ns.URL, "replica-a"), "-workspace", ws)

	// A runs two executions alone; then B starts and A is killed.
	slow := send(t, "POST", a.url+"/tools/slow_write/execute", `{"seconds":20}`, "Prefer", "respond-async")
	idem := send(t, "POST", a.url+"/tools/sleep/execute", `{"ms":2000}`, "Prefer", "respond-async")
	if slow.status != 202 || idem.status != 202 {
		t.Fatalf("submit on A: %d %s / %d %s", slow.status, slow.body, idem.status, idem.body)
	}
	for _, loc := range []string{slow.header.Get("Location"), idem.header.Get("Location")} {
		deadline := time.Now().Add(10 * time.Second)
		for r := send(t, "GET", a.url+loc, ""); r.env.Status != "running"; r = send(t, "GET", a.url+loc, "") {
			if time.Now().After(deadline) {
				t.Fatalf("%s never ran on A: %s", loc, r.body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	b := startProcess(t, replicaConfig(ns.URL, "replica-b"), "-workspace", ws)
	if err := a.cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no goodbye
		t.Fatal(err)
	}
	<-a.exit
	lost := send(t, "GET", b.url+slow.header.Get("Location")+"?wait=15s", "")
	if lost.status != 200 || lost.env.Status != "interrupted" || lost.env.Error == nil || !strings.Contains(lost.env.Error.Message, "replica-a") {
		t.Errorf("the non-idempotent execution of the killed replica: %d %s", lost.status, lost.body)
	}
	rerun := send(t, "GET", b.url+idem.header.Get("Location")+"?wait=15s", "")
	if rerun.status != 200 || rerun.env.Status != "success" {
		t.Errorf("the idempotent execution of the killed replica: %d %s", rerun.status, rerun.body)
	}
	a = startProcess(t, replicaConfig(ns.URL, "replica-a2"), "-workspace", ws)

	t.Run("submitted on A, read, streamed and cancelled on B", func(t *testing.T) {
		sub := send(t, "POST", a.url+"/executions", `{"tool":"sleep","arguments":{"ms":10000}}`)
		loc := sub.header.Get("Location")
		if sub.status != 202 || loc == "" {
			t.Fatalf("submit: %d %s", sub.status, sub.body)
		}
		if got := send(t, "GET", b.url+loc, ""); got.status != 200 || got.env.ExecutionID != sub.env.ExecutionID {
			t.Fatalf("read on B: %d %s", got.status, got.body)
		}
		var names []string
		done, started := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			names = sseEvents(t, b.url+loc+"/events", func(name, _ string) bool {
				if name == "start" {
					close(started)
				}
				return name == "end" || name == "error"
			})
		}()
		select { // cancelled once it runs, as B's stream shows
		case <-started:
		case <-done:
			t.Fatalf("B's stream ended before the execution started: %v", names)
		}
		if c := send(t, "DELETE", b.url+loc, ""); c.status != 200 || c.env.Status != "cancelled" {
			t.Fatalf("cancel on B: %d %s", c.status, c.body)
		}
		<-done
		if got := strings.Join(names, ","); !strings.HasPrefix(got, "pending,start") || !strings.HasSuffix(got, "error") {
			t.Errorf("events on B: %s", got)
		}
	})

	t.Run("paused on A, resumed on B", func(t *testing.T) {
		p := send(t, "POST", a.url+"/tools/request_user_input/execute", `{"prompt":"Which replica?"}`)
		loc := p.header.Get("Location")
		if p.status != 202 || p.env.Status != "waiting" || loc == "" {
			t.Fatalf("the pause on A: %d %s", p.status, p.body)
		}
		r := send(t, "POST", b.url+loc+"/resume", `{"answer":"B"}`, "Prefer", "wait=10")
		if r.status != 200 || r.env.Status != "success" || string(r.env.Data) != `{"answer":"B"}` {
			t.Fatalf("resumed on B: %d %s", r.status, r.body)
		}
		if again := send(t, "POST", a.url+loc+"/resume", `{"answer":"A"}`); again.status != 409 {
			t.Errorf("a second resumption on A: %d %s", again.status, again.body)
		}
	})

	t.Run("an approval on B releases a call waiting on A", func(t *testing.T) {
		w := send(t, "POST", a.url+"/tools/stamp/execute", ``)
		if w.status != 202 || w.env.Status != "waiting" {
			t.Fatalf("the call waiting on A: %d %s", w.status, w.body)
		}
		list := send(t, "GET", b.url+"/approvals", "")
		if !strings.Contains(string(list.body), w.env.ExecutionID) {
			t.Fatalf("B does not list it: %s", list.body)
		}
		if d := send(t, "POST", b.url+"/approvals/"+w.env.ExecutionID, `{"approve":true,"reason":"checked"}`); d.status != 200 {
			t.Fatalf("approve on B: %d %s", d.status, d.body)
		}
		done := send(t, "GET", a.url+w.header.Get("Location")+"?wait=10s", "")
		if done.env.Status != "success" || !strings.Contains(string(done.env.Data), "stamped") {
			t.Errorf("the approved call: %d %s", done.status, done.body)
		}
	})

	t.Run("an idempotency key used on A replays on B", func(t *testing.T) {
		first := send(t, "POST", a.url+"/tools/echo/execute", `{"message":"once"}`, "Idempotency-Key", "replicas-1")
		again := send(t, "POST", b.url+"/tools/echo/execute", `{"message":"once"}`, "Idempotency-Key", "replicas-1")
		if first.status != 200 || again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
			t.Errorf("replay on B: %d %v %s", again.status, again.header, again.body)
		}
	})

	t.Run("B's activity stream shows A's calls", func(t *testing.T) {
		// The stream is read from its start (after event 1.0), so the call
		// is found whether it ends before B's subscription opens or after;
		// its request id tells it from every other.
		seen := make(chan bool, 1)
		go func() {
			found := false
			sseEvents(t, b.url+"/events?tool=echo&last_event_id=1.0", func(_, data string) bool {
				found = strings.Contains(data, `"request_id":"watched-on-b"`) && strings.Contains(data, `"replica":"replica-a2"`) &&
					strings.Contains(data, `"type":"end"`)
				return found
			})
			seen <- found
		}()
		send(t, "POST", a.url+"/tools/echo/execute", `{"message":"watched"}`, "X-Request-ID", "watched-on-b")
		if !<-seen {
			t.Error("A's call never reached B's /events")
		}
	})

	t.Run("NATS restarts under load; nothing accepted is lost", func(t *testing.T) {
		var accepted sync.Map // location -> replica url
		var refused atomic.Int64
		submits := newProgress()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, p := range []*proc{a, b, a, b, a, b} { // three clients per replica
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 2000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					r := send(t, "POST", p.url+"/tools/sleep/execute", `{"ms":20}`, "Prefer", "respond-async")
					switch r.status {
					case 202:
						accepted.Store(r.header.Get("Location"), p.url)
					case 503:
						refused.Add(1) // not accepted while the store is away: the caller knows
					default:
						t.Errorf("submit: %d %s", r.status, r.body)
					}
					submits.add()
				}
			}()
		}
		submits.await(t, 30, "submits before NATS stops")
		ns.Stop()
		deadline := time.Now().Add(10 * time.Second)
		for send(t, "GET", a.url+"/readyz", "").status != 503 {
			if time.Now().After(deadline) {
				t.Fatal("/readyz stayed 200 with NATS down")
			}
			time.Sleep(20 * time.Millisecond)
		}
		submits.await(t, 12, "submits while NATS is down")
		ns.Start()
		deadline = time.Now().Add(20 * time.Second)
		for send(t, "GET", a.url+"/readyz", "").status != 200 || send(t, "GET", b.url+"/readyz", "").status != 200 {
			if time.Now().After(deadline) {
				t.Fatal("a replica did not report ready after NATS came back")
			}
			time.Sleep(50 * time.Millisecond)
		}
		submits.await(t, 30, "submits after NATS is back")
		close(stop)
		wg.Wait()
		n, notDone := 0, 0
		accepted.Range(func(k, v any) bool {
			n++
			if r := send(t, "GET", v.(string)+k.(string)+"?wait=20s", ""); r.status != 200 || r.env.Status != "success" {
				notDone++
				t.Errorf("accepted execution %s: %d %s", k, r.status, r.body)
			}
			return notDone < 5
		})
		if n == 0 {
			t.Fatal("no execution was accepted")
		}
		t.Logf("%d accepted executions all succeeded; %d submits refused with 503 while NATS was down", n, refused.Load())
		if v := a.gauge(t, "toold_store_reconnects_total"); v == "" || v == "0" {
			t.Errorf("toold_store_reconnects_total on A is %q", v)
		}
	})
}

// progress counts what concurrent clients have done, and wakes a waiter
// at each step: a test waits for work to happen, not for time to pass.
type progress struct {
	n    atomic.Int64
	tick chan struct{}
}

func newProgress() *progress { return &progress{tick: make(chan struct{}, 1)} }

func (p *progress) add() {
	p.n.Add(1)
	select {
	case p.tick <- struct{}{}:
	default:
	}
}

// await waits (30 s at most) until n more steps are done.
func (p *progress) await(t *testing.T, n int64, what string) {
	t.Helper()
	want := p.n.Load() + n
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for p.n.Load() < want {
		select {
		case <-p.tick:
		case <-timeout.C:
			t.Fatalf("%d %s in 30 s, want %d", n-(want-p.n.Load()), what, n)
		}
	}
}
