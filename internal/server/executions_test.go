package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/apitest"
	"github.com/toold/toold/internal/auth"
	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/executions"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools"
)

// storeHarness is a harness on an embedded store with the counter tool and
// keys for each role.
func storeHarness(t *testing.T, o harnessOpts) (*harness, *atomic.Int64) {
	t.Helper()
	n := &atomic.Int64{}
	o.store = true
	o.tools = append(testTools(), counter{n})
	return newHarness(t, o), n
}

// Keys of the role tests: their bearer tokens and configured hashes.
var (
	keyAlice    = "alice-key-0123456789"
	keyBob      = "bob-key-0123456789ab"
	keyObserver = "observer-key-0123456"
	keyAdmin    = "admin-key-0123456789"
	roleKeys    = []auth.Key{
		{Name: "alice", SHA256: auth.Hash(keyAlice), Tools: []string{"*"}},
		{Name: "bob", SHA256: auth.Hash(keyBob), Tools: []string{"*"}, Roles: []auth.Role{auth.RoleCall}},
		{Name: "observer", SHA256: auth.Hash(keyObserver), Tools: []string{"*"}, Roles: []auth.Role{auth.RoleObserve}},
		{Name: "admin", SHA256: auth.Hash(keyAdmin), Tools: []string{"*"}, Roles: []auth.Role{auth.RoleAdmin, auth.RoleCall}},
	}
)

func bearer(key string, more ...string) map[string]string {
	h := map[string]string{"Authorization": "Bearer " + key}
	for i := 0; i+1 < len(more); i += 2 {
		h[more[i]] = more[i+1]
	}
	return h
}

func hdr(kv ...string) map[string]string { return bearer(keyAlice, kv...) }

// TestSubmitOfAQuickCallIsAccepted: a submit without wait is answered 202
// with Location even when its call ended before the answer (a quick tool
// runs where it was accepted: executions.Options.SubmitWindow); the body
// says it ended, and its Location reads the end.
func TestSubmitOfAQuickCallIsAccepted(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, exec: func(o *executions.Options) { o.SubmitWindow = time.Second }})
	first := h.exec("echo", `{"message":"teach"}`, hdr("Prefer", "respond-async")) // echo not run here yet: queued
	if got := h.do("GET", first.header.Get("Location")+"?wait=5s", nil, hdr()); got.status != 200 || got.env.Status != dispatch.StatusSuccess {
		t.Fatalf("the first: %d %s", got.status, got.body)
	}
	r := h.exec("echo", `{"message":"quick"}`, hdr("Prefer", "respond-async"))
	if r.status != 202 || r.env.Status != dispatch.StatusSuccess || r.header.Get("Location") != "/executions/"+r.env.ExecutionID ||
		r.header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("submit of a quick call: %d %v %s", r.status, r.header, r.body)
	}
	if got := h.do("GET", r.header.Get("Location"), nil, hdr()); got.status != 200 || !strings.Contains(string(got.env.Data), "quick") {
		t.Fatalf("its location: %d %s", got.status, got.body)
	}
}

// TestAsyncExecution: Prefer: respond-async answers 202 with the location
// and the pending envelope; the execution is read, waited for and listed.
func TestAsyncExecution(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	r := h.exec("echo", `{"message":"later"}`, hdr("Prefer", "respond-async"))
	if r.status != 202 || r.env.ExecutionID == "" || r.header.Get("Location") != "/executions/"+r.env.ExecutionID ||
		r.header.Get("Preference-Applied") != "respond-async" || r.env.Status.Final() {
		t.Fatalf("submit: %d %v %s", r.status, r.header, r.body)
	}
	got := h.do("GET", r.header.Get("Location")+"?wait=5s", nil, hdr())
	if got.status != 200 || got.env.Status != dispatch.StatusSuccess || !strings.Contains(string(got.env.Data), "later") ||
		got.env.ExecutionID != r.env.ExecutionID {
		t.Fatalf("wait: %d %s", got.status, got.body)
	}
	// Prefer: wait answers 200 with the final envelope when it ends in time.
	w := h.exec("echo", `{"message":"soon"}`, hdr("Prefer", "respond-async, wait=5"))
	if w.status != 200 || w.env.Status != dispatch.StatusSuccess || w.header.Get("Preference-Applied") != "respond-async, wait=5" {
		t.Fatalf("prefer wait: %d %v %s", w.status, w.header, w.body)
	}
	// POST /executions is the same, with the tool in the body.
	p := h.do("POST", "/executions", []byte(`{"tool":"counter","arguments":{"label":"x"}}`), hdr("Prefer", "wait=5"))
	if p.status != 200 || p.env.Tool != "counter" || p.env.Status != dispatch.StatusSuccess {
		t.Fatalf("POST /executions: %d %s", p.status, p.body)
	}
	list := h.do("GET", "/executions?limit=2", nil, hdr())
	var page executions.Page
	json.Unmarshal(list.body, &page)
	if list.status != 200 || len(page.Executions) != 2 || page.Next == "" || page.Executions[0].Tool != "counter" {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	next := h.do("GET", "/executions?limit=2&cursor="+page.Next, nil, hdr())
	var page2 executions.Page
	json.Unmarshal(next.body, &page2)
	if len(page2.Executions) != 1 || page2.Next != "" || page2.Executions[0].ExecutionID != r.env.ExecutionID {
		t.Fatalf("second page: %s", next.body)
	}
	filtered := h.do("GET", "/executions?tool=counter&status=success", nil, hdr())
	var page3 executions.Page
	json.Unmarshal(filtered.body, &page3)
	if len(page3.Executions) != 1 {
		t.Fatalf("filtered: %s", filtered.body)
	}
	// Another key sees none of it: its list is empty and the id is 404.
	if other := h.do("GET", "/executions", nil, bearer(keyBob)); !strings.Contains(string(other.body), `"executions":[]`) {
		t.Errorf("bob's list: %s", other.body)
	}
	if other := h.do("GET", r.header.Get("Location"), nil, bearer(keyBob)); other.status != 404 || other.env.Error.Code != "no_execution" {
		t.Errorf("bob reads alice's execution: %d %s", other.status, other.body)
	}
}

// TestCancel: DELETE stops a running execution wherever it runs, a single
// call or a batch; the record ends cancelled, and cancelling it again
// changes nothing.
func TestCancel(t *testing.T) {
	h, n := storeHarness(t, harnessOpts{keys: roleKeys})
	for _, tc := range []struct{ name, path, body string }{
		{"call", "/executions", `{"tool":"counter","arguments":{"ms":5000}}`},
		{"batch", "/batch", `{"calls":[{"tool":"counter","arguments":{"ms":5000}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, []byte(tc.body), hdr("Prefer", "respond-async"))
			loc := r.header.Get("Location")
			waitUntil(t, "the execution runs", func() bool { return h.do("GET", loc, nil, hdr()).env.Status == dispatch.StatusRunning })
			d := h.do("DELETE", loc, nil, hdr())
			if d.status != 200 || d.env.Status != dispatch.StatusCancelled || d.env.Error == nil || d.env.Error.Code != "cancelled" {
				t.Fatalf("cancel: %d %s", d.status, d.body)
			}
			if again := h.do("DELETE", loc, nil, hdr()); again.status != 200 || again.env.Status != dispatch.StatusCancelled {
				t.Errorf("cancel again: %d %s", again.status, again.body)
			}
			if n.Load() != 0 {
				t.Errorf("the cancelled call counted %d", n.Load())
			}
			if other := h.do("DELETE", loc, nil, bearer(keyBob)); other.status != 404 {
				t.Errorf("bob cancels alice's: %d", other.status)
			}
		})
	}
}

// TestExecutionEvents: an execution's events stream from its acceptance to
// its end; Last-Event-ID resumes after an event. A call that ended before
// its id was given out (quick, without output) published none of its
// own: its record tells the same events, without ids.
func TestExecutionEvents(t *testing.T) {
	h := newHarness(t, harnessOpts{keys: roleKeys, store: true,
		tools: append(testTools(), counter{&atomic.Int64{}}, streamTool{cancelled: make(chan struct{})})})
	for _, tc := range []struct {
		name, tool, args string
		want             string // the events' names
		told             bool   // told from the record
	}{
		{"ended before its id was out", "echo", `{"message":"streamed"}`, "pending,start,end", true},
		{"ran past its window", "counter", `{"ms":120}`, "pending,start,end", false},
		{"ended quickly, with output", "stream", `{"chunks":["a"]}`, "pending,start,output,end", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.exec(tc.tool, tc.args, hdr("Prefer", "respond-async, wait=5"))
			if r.status != 200 {
				t.Fatalf("call: %d %s", r.status, r.body)
			}
			evs := h.sse(r.header.Get("Location")+"/events", hdr(), 10)
			var names []string
			for _, e := range evs {
				names = append(names, e.name)
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Fatalf("events %s, want %s", got, tc.want)
			}
			end := evs[len(evs)-1]
			apitest.CheckSchema(t, "Envelope", []byte(end.data))
			var start events.Event
			if err := json.Unmarshal([]byte(evs[1].data), &start); err != nil || start.ExecutionID != r.env.ExecutionID ||
				start.Tool != tc.tool || start.Time.IsZero() {
				t.Errorf("start: %s %v", evs[1].data, err)
			}
			if told := evs[1].id == "" && end.id == ""; told != tc.told {
				t.Fatalf("events' ids %q, %q: told from the record %v, want %v", evs[1].id, end.id, told, tc.told)
			}
			if tc.told {
				return
			}
			resumed := h.sse(r.header.Get("Location")+"/events", hdr("Last-Event-ID", evs[len(evs)-2].id), 10)
			if len(resumed) != 1 || resumed[0].name != "end" {
				t.Errorf("resumed after %s: %+v", evs[1].id, resumed)
			}
		})
	}
}

// TestGetWaitReadsOnce: GET ?wait of an execution still running reads
// its record once, as the wait begins, and gets its end from the replica
// that ran it (no second read before waiting, none after).
func TestGetWaitReadsOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	// A heartbeat that does not come round during the call: its reads of
	// the record (is it cancelled?) are not the GET's.
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, metrics: reg, exec: func(o *executions.Options) { o.Heartbeat = time.Minute }})
	reads := func() uint64 { return statetest.Ops(t, reg)["toold_executions_get"] }
	r := h.exec("counter", `{"ms":300}`, hdr("Prefer", "respond-async"))
	if r.status != 202 {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	before := reads()
	got := h.do("GET", r.header.Get("Location")+"?wait=10s", nil, hdr())
	if got.status != 200 || got.env.Status != dispatch.StatusSuccess {
		t.Fatalf("GET ?wait: %d %s", got.status, got.body)
	}
	if n := reads() - before; n != 1 {
		t.Errorf("GET ?wait read the record %d times, want once", n)
	}
}

type sseEvent struct{ id, name, data string }

// sse reads up to max events of a stream (it ends when the server ends it).
func (h *harness) sse(path string, header map[string]string, max int) []sseEvent {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+path, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := h.http.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		h.t.Fatalf("%s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for len(out) < max && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
		}
	}
	return out
}

// TestIdempotencyKey: the same key and request replays without running the
// tool again; other arguments are 422; a duplicate of a running request
// waits for its answer.
func TestIdempotencyKey(t *testing.T) {
	h, n := storeHarness(t, harnessOpts{keys: roleKeys})
	first := h.exec("counter", `{"label":"a","ms":1}`, hdr("Idempotency-Key", `"k-1"`))
	again := h.exec("counter", `{"ms":1, "label":"a"}`, hdr("Idempotency-Key", "k-1"))
	if first.status != 200 || again.status != 200 || string(again.env.Data) != string(first.env.Data) ||
		again.header.Get("Idempotent-Replayed") != "true" || first.header.Get("Idempotent-Replayed") != "" || n.Load() != 1 {
		t.Fatalf("replay: %s / %s (%v), ran %d times", first.body, again.body, again.header, n.Load())
	}
	other := h.exec("counter", `{"label":"b"}`, hdr("Idempotency-Key", "k-1"))
	if other.status != 422 || other.env.Error.Code != "idempotency_key_reused" {
		t.Fatalf("other arguments: %d %s", other.status, other.body)
	}
	if bob := h.exec("counter", `{"label":"a","ms":1}`, bearer(keyBob, "Idempotency-Key", "k-1")); bob.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("one key's idempotency key replayed for another key")
	}
	// Concurrent duplicates: one runs, the other waits and replays.
	var wg sync.WaitGroup
	res := make([]*response, 2)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = h.exec("counter", `{"label":"slow","ms":300}`, hdr("Idempotency-Key", "k-2"))
		}()
	}
	wg.Wait()
	if res[0].status != 200 || res[1].status != 200 || string(res[0].env.Data) != string(res[1].env.Data) {
		t.Fatalf("concurrent: %s / %s", res[0].body, res[1].body)
	}
	// Async: the replay answers the same location.
	a1 := h.exec("echo", `{"message":"x"}`, hdr("Idempotency-Key", "k-3", "Prefer", "respond-async"))
	a2 := h.exec("echo", `{"message":"x"}`, hdr("Idempotency-Key", "k-3", "Prefer", "respond-async"))
	if a1.status != 202 || a2.status != 202 || a2.header.Get("Location") != a1.header.Get("Location") || a2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("async replay: %v / %v", a1.header, a2.header)
	}
	// A sync call with the same key is another request: 422.
	if s := h.exec("echo", `{"message":"x"}`, hdr("Idempotency-Key", "k-3")); s.status != 422 {
		t.Errorf("sync after async with one key: %d", s.status)
	}
}

// TestIdempotencyInFlight409: with no wait configured, a duplicate of a
// running request is refused with 409 and Retry-After.
func TestIdempotencyInFlight409(t *testing.T) {
	reg := prometheus.NewRegistry()
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, metrics: reg, exec: func(o *executions.Options) { o.IdempotencyWait = -1 }})
	done := make(chan *response)
	go func() { done <- h.exec("counter", `{"ms":500}`, hdr("Idempotency-Key", "slow")) }()
	waitUntil(t, "the first call runs", func() bool { return toolGauge(t, reg, "toold_tool_in_flight", "counter") == 1 })
	dup := h.exec("counter", `{"ms":500}`, hdr("Idempotency-Key", "slow"))
	if dup.status != 409 || dup.env.Error.Code != "idempotency_in_flight" || dup.header.Get("Retry-After") == "" {
		t.Errorf("duplicate in flight: %d %v %s", dup.status, dup.header, dup.body)
	}
	if first := <-done; first.status != 200 {
		t.Errorf("first: %d", first.status)
	}
}

// TestTurn: within a turn, a read-only tool's repeated call gets the first
// answer marked redundant; another tool's is refused with a user_error;
// another turn, or no turn, runs again.
func TestTurn(t *testing.T) {
	h, n := storeHarness(t, harnessOpts{keys: roleKeys})
	a := h.exec("echo", `{"message":"m"}`, hdr("Toold-Turn", "t1"))
	b := h.exec("echo", `{ "message": "m" }`, hdr("Toold-Turn", "t1"))
	if a.status != 200 || a.env.Redundant || b.status != 200 || !b.env.Redundant || b.env.RequestID != a.env.RequestID {
		t.Fatalf("read-only repeat: %s / %s", a.body, b.body)
	}
	c1 := h.exec("counter", `{"label":"once"}`, hdr("Toold-Turn", "t1"))
	c2 := h.exec("counter", `{"label":"once"}`, hdr("Toold-Turn", "t1"))
	if c1.status != 200 || !c1.env.Success || c2.status != 200 || c2.env.Error == nil || c2.env.Error.Type != tools.UserError ||
		c2.env.Error.Code != "redundant_call" || n.Load() != 1 {
		t.Fatalf("repeat with effects: %s / %s (ran %d)", c1.body, c2.body, n.Load())
	}
	h.exec("counter", `{"label":"once"}`, hdr("Toold-Turn", "t2"))
	h.exec("counter", `{"label":"once"}`, hdr())
	if n.Load() != 3 {
		t.Errorf("another turn or none ran %d times in all, want 3", n.Load())
	}
}

// TestBatch: every envelope in order, the counts and durations; calls run
// in parallel; stop_on_error skips what had not started; async batches.
func TestBatch(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	body := `{"calls":[{"id":"a","tool":"sleep","arguments":{"ms":200}},{"tool":"sleep","arguments":{"ms":200}},` +
		`{"id":"c","tool":"echo","arguments":{"message":1}},{"id":"d","tool":"nope"}]}`
	r := h.do("POST", "/batch", []byte(body), hdr())
	var res executions.BatchResult
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	ids := []string{}
	for _, it := range res.Results {
		ids = append(ids, it.ID+":"+string(it.Envelope.Status))
	}
	if got := strings.Join(ids, ","); got != "a:success,1:success,c:rejected,d:not_found" {
		t.Errorf("results %s", got)
	}
	if res.SuccessCount != 2 || res.FailureCount != 2 || res.MaxDurationMS < 200 || res.TotalDurationMS > 390 {
		t.Errorf("counts and durations (calls run in parallel): %+v", res)
	}
	stop := h.do("POST", "/batch", []byte(`{"max_parallel":1,"stop_on_error":true,"calls":[{"tool":"fail","arguments":{"kind":"user"}},{"tool":"echo","arguments":{"message":"x"}}]}`), hdr())
	var sres executions.BatchResult
	json.Unmarshal(stop.body, &sres)
	if len(sres.Results) != 2 || sres.Results[1].Envelope.Error == nil || sres.Results[1].Envelope.Error.Code != "skipped" {
		t.Errorf("stop_on_error: %s", stop.body)
	}
	async := h.do("POST", "/batch", []byte(`{"calls":[{"tool":"echo","arguments":{"message":"x"}}]}`), hdr("Prefer", "respond-async, wait=5"))
	var ares executions.BatchResult
	if async.status != 200 || json.Unmarshal(async.env.Data, &ares) != nil || ares.SuccessCount != 1 {
		t.Errorf("async batch: %d %s", async.status, async.body)
	}
}

// TestActivityAndAuditRoutes: /events needs observe and shows every call,
// filterable; /audit needs admin and holds a record per call; the roles of
// a key are enforced, and a key reaching for a role it lacks is audited.
func TestActivityAndAuditRoutes(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	if r := h.do("GET", "/events", nil, bearer(keyAlice)); r.status != 403 || r.env.Error.Code != "missing_role" {
		t.Errorf("events without observe: %d %s", r.status, r.body)
	}
	if r := h.exec("echo", `{"message":"x"}`, bearer(keyObserver)); r.status != 403 {
		t.Errorf("execute without call: %d", r.status)
	}
	if r := h.do("GET", "/audit", nil, bearer(keyAlice)); r.status != 403 {
		t.Errorf("audit without admin: %d", r.status)
	}
	h.exec("echo", `{"message":"one"}`, hdr())
	h.exec("fail", `{"kind":"user"}`, hdr())
	time.Sleep(50 * time.Millisecond) // the recorder flushes every 5ms here
	// What the stream holds, read from the store: a call that started and
	// ended within one flush has only its end event (coalesced), so how
	// many events there are depends on when the flushes fell.
	var want []string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	events.Activity(ctx, h.st, events.Position{FromStart: true}, events.Filter{}, func(ev events.Event) bool {
		want = append(want, ev.Type+" "+ev.Tool+" "+ev.Caller+" "+ev.Status)
		return !(ev.Type == "error" && ev.Tool == "fail")
	})
	cancel()
	if len(want) < 2 || want[len(want)-1] != "error fail alice error" ||
		want[len(want)-2] != "end echo alice success" && want[len(want)-2] != "start fail alice " {
		t.Fatalf("the activity stream holds %q", want)
	}
	evs := h.sse("/events?last_event_id=1", bearer(keyObserver), len(want)-1) // after the first event
	var got []string
	for _, e := range evs {
		var ev struct{ Tool, Caller, Status string }
		json.Unmarshal([]byte(e.data), &ev)
		apitest.CheckSchema(t, "ActivityEvent", []byte(e.data))
		got = append(got, e.name+" "+ev.Tool+" "+ev.Caller+" "+ev.Status)
	}
	if strings.Join(got, "|") != strings.Join(want[1:], "|") {
		t.Errorf("activity %q, want %q", got, want[1:])
	}
	filtered := h.sse("/events?last_event_id=1&tool=fail&status=error", bearer(keyObserver), 1)
	if len(filtered) != 1 || !strings.Contains(filtered[0].data, `"tool":"fail"`) {
		t.Errorf("filtered: %+v", filtered)
	}
	a := h.do("GET", "/audit?limit=1", nil, bearer(keyAdmin))
	var page struct {
		Records []json.RawMessage
		Next    string
	}
	json.Unmarshal(a.body, &page)
	if a.status != 200 || len(page.Records) != 1 || page.Next == "" || !strings.Contains(string(page.Records[0]), `"action":"refused"`) ||
		!strings.Contains(string(page.Records[0]), `"target":"GET /events: the key lacks the observe role"`) {
		t.Fatalf("audit: %d %s", a.status, a.body)
	}
	rest := h.do("GET", "/audit?after="+page.Next, nil, bearer(keyAdmin))
	json.Unmarshal(rest.body, &page)
	if len(page.Records) < 3 || !strings.Contains(string(page.Records[0]), `"target":"GET /audit: the key lacks the admin role"`) ||
		!strings.Contains(string(rest.body), `"tool":"fail"`) {
		t.Errorf("audit after %s: %s", page.Next, rest.body)
	}
}

// TestExecutionBadInput: each bad request gets the envelope with its
// status and a message naming what to fix, and the server keeps serving.
func TestExecutionBadInput(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	calls := make([]string, 33)
	for i := range calls {
		calls[i] = `{"tool":"echo","arguments":{"message":"x"}}`
	}
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		code, say                string
	}{
		{"unknown execution", "GET", "/executions/0123456789abcdef01234567", "", hdr(), 404, "no_execution", "no execution"},
		{"malformed id", "GET", "/executions/..%2f..", "", hdr(), 404, "", ""},
		{"malformed Prefer", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Prefer", "respond-async=yes please"), 400, "invalid_header", "Prefer"},
		{"Prefer wait not a number", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Prefer", "respond-async, wait=soon"), 400, "invalid_header", "whole number"},
		{"Prefer wait too long", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Prefer", "respond-async, wait=3600"), 400, "invalid_header", "longest wait"},
		{"Idempotency-Key too long", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Idempotency-Key", strings.Repeat("k", 256)), 400, "invalid_header", "256 characters"},
		{"Idempotency-Key control character", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Idempotency-Key", "a\tb"), 400, "invalid_header", "printable"},
		{"Toold-Turn malformed", "POST", "/tools/echo/execute", `{"message":"x"}`, hdr("Toold-Turn", "a b"), 400, "invalid_header", "Toold-Turn"},
		{"wait beyond maximum", "GET", "/executions/0123456789abcdef01234567?wait=10m", "", hdr(), 400, "invalid_parameter", "longest wait"},
		{"wait not a duration", "GET", "/executions/0123456789abcdef01234567?wait=later", "", hdr(), 400, "invalid_parameter", "not a duration"},
		{"wait overflowing", "GET", "/executions/0123456789abcdef01234567?wait=99999999999", "", hdr(), 400, "invalid_parameter", "not a duration"},
		{"batch over the cap", "POST", "/batch", `{"calls":[` + strings.Join(calls, ",") + `]}`, hdr(), 400, "invalid_batch", "at most 32"},
		{"batch duplicate ids", "POST", "/batch", `{"calls":[{"id":"a","tool":"echo"},{"id":"a","tool":"echo"}]}`, hdr(), 400, "invalid_batch", "ids must be unique"},
		{"batch empty", "POST", "/batch", `{"calls":[]}`, hdr(), 400, "invalid_batch", "at least one"},
		{"batch unknown field", "POST", "/batch", `{"calls":[{"tool":"echo"}],"parallel":2}`, hdr(), 400, "invalid_batch", "parallel"},
		{"batch not json", "POST", "/batch", `{"calls":`, hdr(), 400, "invalid_json", "JSON"},
		{"async batch unknown tool", "POST", "/batch", `{"calls":[{"tool":"echo","arguments":{"message":"x"}},{"tool":"ecco"}]}`, hdr("Prefer", "respond-async"), 404, "", `call 1 of the batch: there is no tool named "ecco"`},
		{"async batch invalid arguments", "POST", "/batch", `{"calls":[{"tool":"echo","arguments":{"message":1}}]}`, hdr("Prefer", "respond-async"), 400, "", "call 0 of the batch: 1 argument problem(s): /message must be string"},
		{"executions body without tool", "POST", "/executions", `{"arguments":{}}`, hdr(), 400, "invalid_json", "no tool"},
		{"async unknown tool", "POST", "/executions", `{"tool":"nope"}`, hdr(), 404, "", "no tool named"},
		{"async invalid arguments", "POST", "/tools/echo/execute", `{"message":1}`, hdr("Prefer", "respond-async"), 400, "", "must be string"},
		{"list bad limit", "GET", "/executions?limit=1000", "", hdr(), 400, "invalid_parameter", "limit"},
		{"list bad cursor", "GET", "/executions?cursor=zzz", "", hdr(), 400, "invalid_parameter", "cursor"},
		{"list bad status", "GET", "/executions?status=done", "", hdr(), 400, "invalid_parameter", "status"},
		{"bad Last-Event-ID", "GET", "/events", "", bearer(keyObserver, "Last-Event-ID", "yesterday"), 400, "invalid_header", "Last-Event-ID"},
		{"bad audit cursor", "GET", "/audit?after=x", "", bearer(keyAdmin), 400, "invalid_parameter", "after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			r := h.do(tt.method, tt.path, body, tt.header)
			if r.status != tt.status || r.env.Error == nil || tt.code != "" && string(r.env.Error.Code) != tt.code ||
				!strings.Contains(r.env.Error.Message, tt.say) {
				t.Errorf("%d %s", r.status, r.body)
			}
			if strings.HasPrefix(tt.name, "async batch") && (len(r.env.Error.Fields) == 0 || !strings.HasPrefix(r.env.Error.Fields[0].Pointer, "/calls/")) {
				t.Errorf("the fields do not point into the batch: %s", r.body)
			}
			if r.env.Error != nil && r.env.Error.Suggestion == "" && r.status != 404 {
				t.Errorf("no suggestion: %s", r.body)
			}
		})
	}
	if r := h.exec("echo", `{"message":"still here"}`, hdr()); r.status != 200 {
		t.Fatalf("the server stopped serving: %d", r.status)
	}
}

// TestStoreDown: with the store gone, async calls and idempotency keys
// are refused with 503 (nothing accepted), sync calls go on, and
// readiness fails.
func TestStoreDown(t *testing.T) {
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys})
	if r := h.do("GET", "/readyz", nil, nil); r.status != 200 {
		t.Fatalf("readyz: %d", r.status)
	}
	h.st.Close()
	for _, hd := range []map[string]string{hdr("Prefer", "respond-async"), hdr("Idempotency-Key", "k")} {
		r := h.exec("echo", `{"message":"x"}`, hd)
		if r.status != 503 || r.env.Error.Code != "store_unavailable" || r.header.Get("Retry-After") == "" {
			t.Errorf("%v: %d %s", hd, r.status, r.body)
		}
	}
	if r := h.exec("echo", `{"message":"x"}`, hdr()); r.status != 200 {
		t.Errorf("sync call with the store down: %d %s", r.status, r.body)
	}
	if r := h.do("GET", "/readyz", nil, nil); r.status != 503 || !strings.Contains(string(r.body), "store_unavailable") {
		t.Errorf("readyz: %d %s", r.status, r.body)
	}
}

// TestNoStore: with the store off, batches still run; the rest says the
// store is off.
func TestNoStore(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if r := h.do("POST", "/batch", []byte(`{"calls":[{"tool":"echo","arguments":{"message":"x"}}]}`), nil); r.status != 200 {
		t.Errorf("batch: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/executions", "/events", "/audit"} {
		if r := h.do("GET", path, nil, nil); r.status != 503 || r.env.Error.Code != "store_unavailable" {
			t.Errorf("%s: %d %s", path, r.status, r.body)
		}
	}
}

func FuzzParsePrefer(f *testing.F) {
	for _, s := range []string{"respond-async", "respond-async, wait=10", `return=minimal; foo="b,a;r"`, "wait=", "=x", "a=\"\x01\"", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePrefer([]string{s}, time.Minute)
		if err == nil && (p.wait < 0 || p.wait > time.Minute) {
			t.Errorf("%q: wait %v", s, p.wait)
		}
		if err != nil && (err.Code != "invalid_header" || err.Suggestion == "") {
			t.Errorf("%q: %+v", s, err)
		}
	})
}

func FuzzParseIdempotencyKey(f *testing.F) {
	for _, s := range []string{`"abc"`, "abc", `""`, strings.Repeat("x", 300), "a\"b", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := &http.Request{Header: http.Header{"Idempotency-Key": {s}}}
		k, err := parseIdempotencyKey(r)
		if err != nil {
			return
		}
		if k == "" || len(k) > MaxIdempotencyKey || strings.ContainsAny(k, "\"\\") || !strings.Contains(s, k) {
			t.Errorf("%q accepted as %q", s, k)
		}
		for _, c := range []byte(k) {
			if c < 0x20 || c > 0x7e {
				t.Errorf("%q accepted as %q, which holds byte %#x", s, k, c)
			}
		}
	})
}

func FuzzParseWait(f *testing.F) {
	for _, s := range []string{"30s", "10", "-1s", "1h", "5000000000000s", "1e3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseWait(s, time.Minute)
		if err == nil && (d < 0 || d > time.Minute) {
			t.Errorf("%q: %v", s, d)
		}
	})
}

func FuzzParseBatch(f *testing.F) {
	f.Add([]byte(`{"calls":[{"id":"a","tool":"echo","arguments":{"message":"x"}}],"max_parallel":2}`))
	f.Add([]byte(`{"calls":[{"id":"a","tool":"echo"},{"id":"a","tool":"echo"}]}`))
	f.Add([]byte(`{"calls":null,"stop_on_error":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := executions.ParseBatch(body, 32, 64)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, c := range b.Calls {
			if seen[c.ID] || c.ID == "" || c.Tool == "" {
				t.Errorf("accepted %s", body)
			}
			seen[c.ID] = true
		}
		if len(b.Calls) == 0 || len(b.Calls) > 32 {
			t.Errorf("accepted %d calls", len(b.Calls))
		}
	})
}

func FuzzListCursor(f *testing.F) {
	for _, s := range []string{"0123456789abcdef01234567", "", "zz", "0123456789ABCDEF01234567"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if executions.ValidID(s) && (len(s) != 24 || strings.ToLower(s) != s) {
			t.Errorf("%q accepted", s)
		}
	})
}

// TestStatusTableForExecutions: the codes of the execution routes map to
// their statuses in the one table.
func TestStatusTableForExecutions(t *testing.T) {
	for _, tt := range []struct {
		kind tools.Kind
		code string
		want int
	}{
		{tools.ValidationError, "idempotency_key_reused", 422},
		{tools.OverloadError, "idempotency_in_flight", 409},
		{tools.OverloadError, "store_full", 507},
		{tools.OverloadError, "store_unavailable", 503},
		{tools.NotFound, "no_execution", 404},
		{tools.ValidationError, "invalid_batch", 400},
		{tools.PermissionError, "missing_role", 403},
		{tools.UserError, "redundant_call", 200},
	} {
		env := dispatch.Failure("r", "t", dispatch.StatusRejected, tools.Errorf(tt.kind, "x").WithCode(tools.Code(tt.code)))
		if got := httpStatus(env); got != tt.want {
			t.Errorf("%s/%s: %d, want %d", tt.kind, tt.code, got, tt.want)
		}
	}
	for _, tt := range []struct {
		status dispatch.Status
		op     int
		wait   time.Duration
		want   int
	}{
		{dispatch.StatusPending, opSubmit, 0, 202}, {dispatch.StatusSuccess, opSubmit, 0, 202}, {dispatch.StatusPending, opSubmit, time.Second, 202},
		{dispatch.StatusSuccess, opSubmit, time.Second, 200}, {dispatch.StatusRunning, opRead, 0, 200},
		{dispatch.StatusRunning, opCancel, 0, 202}, {dispatch.StatusCancelled, opCancel, 0, 200}, {dispatch.StatusInterrupted, opRead, 0, 200},
	} {
		if got := executionStatus(&dispatch.Envelope{Status: tt.status}, tt.op, tt.wait); got != tt.want {
			t.Errorf("%s op %d wait %v: %d, want %d", tt.status, tt.op, tt.wait, got, tt.want)
		}
	}
}

// downTool always fails in a way a fallback may get past, and falls back
// to secret.
type downTool struct{}

func (downTool) Spec() tools.Spec {
	return tools.Spec{Name: "down", Description: "Always down.", Category: tools.Direct, Fallback: []string{"secret"},
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (downTool) Execute(context.Context, *tools.Call) (any, error) {
	return nil, tools.Errorf(tools.SystemError, "the API is down").WithCode("upstream_unavailable")
}

// secretTool counts its runs.
type secretTool struct{ n *atomic.Int64 }

func (secretTool) Spec() tools.Spec {
	return tools.Spec{Name: "secret", Description: "Only for some keys.", Category: tools.Direct,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (s secretTool) Execute(context.Context, *tools.Call) (any, error) {
	s.n.Add(1)
	return "secret ran", nil
}

// TestFallbacksKeepToTheKeysTools: a fallback the caller's key may not use
// is skipped however the call came: sync, async (run by a worker after the
// request is gone), or in an async batch.
func TestFallbacksKeepToTheKeysTools(t *testing.T) {
	const key = "limited-key-0123456789"
	n := &atomic.Int64{}
	h := newHarness(t, harnessOpts{store: true, keys: []auth.Key{{Name: "limited", SHA256: auth.Hash(key), Tools: []string{"down"}}},
		tools: append(testTools(), downTool{}, secretTool{n})})
	async := bearer(key, "Prefer", "respond-async, wait=5")
	for _, tc := range []struct {
		name       string
		path, body string
		header     map[string]string
	}{
		{"sync", "/tools/down/execute", `{}`, bearer(key)},
		{"async", "/tools/down/execute", `{}`, async},
		{"POST /executions", "/executions", `{"tool":"down","arguments":{}}`, async},
		{"async batch", "/batch", `{"calls":[{"tool":"down","arguments":{}}]}`, async},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, []byte(tc.body), tc.header)
			if strings.Contains(string(r.body), "secret ran") || n.Load() != 0 {
				t.Fatalf("a key not allowed secret had it run as a fallback (%d runs): %d %s", n.Load(), r.status, r.body)
			}
			if !strings.Contains(string(r.body), "upstream_unavailable") {
				t.Fatalf("the primary's failure is not the answer: %d %s", r.status, r.body)
			}
		})
	}
}

// TestRefusalsAreNotRemembered: a confirmation challenge ran nothing, so
// neither the idempotency key nor the turn keeps it as the answer: the same
// call with its Toold-Confirm token runs, once.
func TestRefusalsAreNotRemembered(t *testing.T) {
	ct := confirmTool{runs: make(chan string, 10)}
	h := newHarness(t, harnessOpts{store: true, keys: roleKeys, tools: append(testTools(), ct)})
	for _, tc := range []struct{ name, header, value string }{
		{"idempotency key", "Idempotency-Key", "confirm-1"},
		{"turn", "Toold-Turn", "turn-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.exec("dangerous", `{"target":"prod"}`, hdr(tc.header, tc.value))
			if r.status != 428 {
				t.Fatalf("first call: %d %s", r.status, r.body)
			}
			ok := h.exec("dangerous", `{"target":"prod"}`, hdr(tc.header, tc.value, "Toold-Confirm", r.env.Error.ConfirmToken))
			if ok.status != 200 || !ok.env.Success || len(ct.runs) != 1 {
				t.Fatalf("the confirmed call: %d %s (ran %d times)", ok.status, ok.body, len(ct.runs))
			}
			<-ct.runs
		})
	}
}

// TestArgumentDepthIsTheConfiguredOne: arguments may nest as deep as the
// pipeline allows however they come, alone or inside a batch or an
// execution request, and no deeper.
func TestArgumentDepthIsTheConfiguredOne(t *testing.T) {
	const depth = 100
	h, _ := storeHarness(t, harnessOpts{keys: roleKeys, maxDepth: depth})
	nested := func(levels int) string { // {"message":"x","data":{"a":{"a":...{}}}}, levels deep in all
		return `{"message":"x","data":` + strings.Repeat(`{"a":`, levels-2) + `{}` + strings.Repeat("}", levels-2) + `}`
	}
	for _, tc := range []struct {
		name, path string
		wrap       func(args string) string
	}{
		{"execute", "/tools/echo/execute", func(a string) string { return a }},
		{"POST /executions", "/executions", func(a string) string { return `{"tool":"echo","arguments":` + a + `}` }},
		{"batch", "/batch", func(a string) string { return `{"calls":[{"tool":"echo","arguments":` + a + `}]}` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := h.do("POST", tc.path, []byte(tc.wrap(nested(depth))), hdr("Prefer", "wait=5")); r.status >= 400 || !strings.Contains(string(r.body), `"success":true`) {
				t.Errorf("arguments %d deep: %d %s", depth, r.status, r.body)
			}
			if r := h.do("POST", tc.path, []byte(tc.wrap(nested(depth+1))), hdr("Prefer", "wait=5")); !strings.Contains(string(r.body), "deeper than") {
				t.Errorf("arguments %d deep: %d %s", depth+1, r.status, r.body)
			}
		})
	}
}

// TestAuditRecordsAsSealed: GET /audit returns each record byte for byte
// as it was sealed, characters HTML escapes (< > &) included: a key named
// "r&d <ops>" came back as "r\u0026d \u003cops\u003e", a line its hash and
// signature do not cover.
func TestAuditRecordsAsSealed(t *testing.T) {
	const key = "rnd-key-0123456789ab"
	h, _ := storeHarness(t, harnessOpts{keys: []auth.Key{{Name: "r&d <ops>", SHA256: auth.Hash(key), Tools: []string{"*"},
		Roles: []auth.Role{auth.RoleAdmin, auth.RoleCall}}}})
	if r := h.exec("echo", `{"message":"x"}`, bearer(key)); r.status != 200 {
		t.Fatalf("echo: %d %s", r.status, r.body)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		a := h.do("GET", "/audit", nil, bearer(key))
		if a.status != 200 {
			t.Fatalf("audit: %d %s", a.status, a.body)
		}
		if strings.Contains(string(a.body), `"caller":"r&d <ops>"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the record of r&d <ops>'s call is not served as sealed: %s", a.body)
		}
	}
}

// TestIdempotencyKeyOfALostReplica: a request under an Idempotency-Key
// whose replica died mid-call leaves a claim with no answer; a retry
// after the claim's lease used to take the key over and run the call
// again — a second run under one key, of a tool that is not idempotent.
// The chaos harness's replica kills made it likely: an answer that could
// not be stored (the store mid-election) leaves the same claim. Now the
// retry is answered that the first request's outcome is unknown
// (interrupted), and that answer is kept for the key; an idempotent tool
// still runs again.
func TestIdempotencyKeyOfALostReplica(t *testing.T) {
	h, n := storeHarness(t, harnessOpts{keys: roleKeys})
	ctx := context.Background()
	body := `{"label":"once"}`
	lost := func(tool, key, body string) {
		t.Helper()
		fp := executions.Fingerprint("sync", tool, []byte(body))
		if _, _, err := h.ex.Begin(ctx, executions.IdempotencyScope("alice"), key, fp, "the-lost-request", 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // past its lease: its replica is gone
	}
	lost("counter", "k-lost", body)
	r := h.exec("counter", body, hdr("Idempotency-Key", "k-lost"))
	if r.status != 500 || r.env.Error == nil || r.env.Error.Code != "interrupted" || !strings.Contains(r.env.Error.Message, "the-lost-request") || n.Load() != 0 {
		t.Fatalf("a retry after a lost replica: %d %s (ran %d times)", r.status, r.body, n.Load())
	}
	again := h.exec("counter", body, hdr("Idempotency-Key", "k-lost"))
	if again.status != 500 || again.header.Get("Idempotent-Replayed") != "true" || n.Load() != 0 {
		t.Fatalf("the answer is kept for the key: %d %v %s", again.status, again.header, again.body)
	}
	lost("echo", "k-lost-echo", `{"message":"again"}`)
	if e := h.exec("echo", `{"message":"again"}`, hdr("Idempotency-Key", "k-lost-echo")); e.status != 200 || e.env.Status != dispatch.StatusSuccess {
		t.Fatalf("an idempotent tool runs again: %d %s", e.status, e.body)
	}
}
