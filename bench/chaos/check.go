//go:build linux

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// invariant is one property of the run, with what broke it.
type invariant struct {
	name       string
	checked    int
	violations []string
}

func (iv *invariant) fail(format string, args ...any) {
	iv.violations = append(iv.violations, fmt.Sprintf(format, args...))
}

// The invariants, as the issue states them.
const (
	invFinal     = "every call answered 200 or 202 reaches one final state, readable on every replica"
	invOutcome   = "no accepted execution ends for the store's sake or with an outcome its call cannot have"
	invIdem      = "an idempotency key never runs twice; its replays answer the same"
	invOnce      = "a call that is not idempotent never runs twice (interrupted if its replica died), nor runs when refused"
	invDecisions = "no approval, answer or resumption is lost or applied twice"
	invAudit     = "the audit log verifies, with every accepted call in it"
	invQuorum    = "while quorum is lost, new calls needing the store get 503 store_unavailable with Retry-After; sync calls go on"
)

// results holds every invariant in the order they are printed.
type results struct {
	list []*invariant
	by   map[string]*invariant
}

func newResults() *results {
	r := &results{by: map[string]*invariant{}}
	for _, name := range []string{invFinal, invOutcome, invIdem, invOnce, invDecisions, invAudit, invQuorum} {
		iv := &invariant{name: name}
		r.list = append(r.list, iv)
		r.by[name] = iv
	}
	return r
}

// ok reports whether nothing was violated.
func (r *results) ok() bool {
	for _, iv := range r.list {
		if len(iv.violations) > 0 {
			return false
		}
	}
	return true
}

// check reads every accepted execution back from every replica, counts
// the marks, verifies the audit log and holds the calls made while the
// store was down to the refusal they should have had.
func (h *harness) check(ops []*op) *results {
	res := newResults()
	finals := h.readFinals(ops, res.by[invFinal])
	runs := h.countRuns()
	for _, o := range ops {
		checkOutcome(o, finals[o.n], res.by[invOutcome], h.frozen(o))
		checkRuns(o, finals[o.n], runs[o.token], res.by[invIdem], res.by[invOnce])
		checkDecision(o, finals[o.n], runs[o.token], res.by[invDecisions])
	}
	h.checkAudit(ops, res.by[invAudit])
	h.checkQuorum(ops, res.by[invQuorum])
	return res
}

// final is an execution as every replica read it at the end.
type final struct {
	env  envelope
	body []byte
}

// readFinals reads each accepted execution on every replica, waiting
// for its end (bounded), and requires one final state everywhere.
func (h *harness) readFinals(ops []*op, iv *invariant) map[int]*final {
	out := map[int]*final{}
	var mu sync.Mutex
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	c := newClient(agentKey)
	for _, o := range ops {
		if !o.accepted() || o.exec == "" {
			continue
		}
		// A wait gives up on the store only when its time is up (the
		// store away all along: a quorum lost for longer).
		if o.poll != nil && o.poll.status >= 500 && o.pollTook < 14*time.Second {
			iv.fail("%s call %d (execution %s): GET ?wait=15s right after its 202 answered %d %s after %v", o.kind, o.n, o.exec,
				o.poll.status, o.poll.code(), o.pollTook.Round(time.Millisecond))
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f, problem := h.readFinal(c, o.exec)
			mu.Lock()
			defer mu.Unlock()
			iv.checked++
			if problem != "" {
				iv.fail("%s call %d (execution %s, accepted on %s): %s", o.kind, o.n, o.exec, o.replica, problem)
				return
			}
			out[o.n] = f
		})
	}
	wg.Wait()
	return out
}

func (h *harness) readFinal(c *client, id string) (*final, string) {
	var got *final
	for _, r := range h.replicas {
		var a *answer
		for attempt := 0; attempt < 10; attempt++ {
			a = c.do("GET", r.url+"/executions/"+id+"?wait=30s", "")
			if a.status == 200 && isFinal(a.env.Status) {
				break
			}
			time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		}
		switch {
		case a.status != 200:
			return nil, fmt.Sprintf("%s answers %d %s", r.name, a.status, a.code())
		case !isFinal(a.env.Status):
			return nil, fmt.Sprintf("never ended: %s reads it %s", r.name, a.env.Status)
		case got == nil:
			got = &final{env: a.env, body: a.body}
		case got.env.Status != a.env.Status:
			return nil, fmt.Sprintf("replicas disagree: %s vs %s", got.env.Status, a.env.Status)
		}
	}
	return got, ""
}

func isFinal(s string) bool {
	return s != "" && s != "pending" && s != "running" && s != "waiting"
}

// frozen reports whether o may have been running on a replica as it was
// paused (SIGSTOP, longer than a direct tool's 5s timeout): its time ran
// out while the process stood still, and timeout is an honest end for it.
// A call in flight as the pause began qualifies if it was sent to the
// paused replica, or if it went through the queue (any replica's worker
// may have taken it: a frozen replica's open pull request takes messages
// too, and its run, resumed, may end before another replica's rerun).
func (h *harness) frozen(o *op) bool {
	for _, f := range h.faults {
		if f.paused == "" || o.start.After(f.start) || !o.end.After(f.start) {
			continue
		}
		if o.replica == f.paused || queued(o.kind) {
			return true
		}
	}
	return false
}

// queued reports whether a kind's calls run wherever the queue hands them.
func queued(kind string) bool {
	// A quick async call runs where accepted, but through the queue until
	// its tool has run on that replica, or when kept past its window and
	// its replica is lost.
	return kind == kindAsync || kind == kindAsyncQuick || kind == kindIdemAsync || kind == kindBatchAsync || kind == kindMark
}

// checkOutcome holds each accepted call to the outcomes its kind can have
// (and a call frozen by a paused replica to timeout as well).
func checkOutcome(o *op, f *final, iv *invariant, frozen bool) {
	if !o.accepted() {
		return
	}
	iv.checked++
	status, code := o.a.env.Status, o.a.code()
	if f != nil {
		status = f.env.Status
		if f.env.Error != nil {
			code = f.env.Error.Code
		}
	}
	if o.exec != "" && f == nil {
		return // its reading failed: counted under the first invariant
	}
	allowed := map[string][]string{
		kindSync: {"success"}, kindBatch: {""}, kindAsync: {"success"}, kindAsyncWait: {"success"}, kindAsyncQuick: {"success"},
		kindBatchAsync: {"success"}, kindMark: {"success", "interrupted"}, kindIdemSync: {"success"},
		kindIdemAsync: {"success", "interrupted"}, kindApproval: {"success", "interrupted", "error"}, kindAnswer: {"success"},
	}[o.kind]
	if frozen {
		allowed = append(slices.Clip(allowed), "timeout")
	}
	if o.kind == kindBatch && o.a.env.SuccessCount != nil && *o.a.env.SuccessCount == 3 {
		status = ""
	}
	if !slices.Contains(allowed, status) || code == "store_unavailable" || code == "store_full" ||
		o.kind == kindApproval && status == "error" && (o.approve || code != "denied") {
		iv.fail("%s call %d (execution %s, on %s) ended %s %s", o.kind, o.n, o.exec, o.replica, status, code)
	}
}

// countRuns reads the marks: how often each token's command started.
func (h *harness) countRuns() map[string]int {
	runs := map[string]int{}
	f, err := os.Open(h.marks)
	if err != nil {
		return runs
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		runs[strings.TrimSpace(sc.Text())]++
	}
	return runs
}

// checkRuns holds marks to their keys: once at most, once when it says
// it ran, never when refused.
func checkRuns(o *op, f *final, runs int, idem, once *invariant) {
	if o.token == "" || o.kind == kindApproval {
		return
	}
	iv := once
	if o.key != "" {
		iv = idem
		if o.replayMismatch != "" {
			iv.fail("%s call %d, key %s: a replay answered differently: %s", o.kind, o.n, o.key, o.replayMismatch)
		}
	}
	iv.checked++
	ended := ""
	if f != nil {
		ended = f.env.Status
	} else if o.accepted() {
		ended = o.a.env.Status
	}
	switch {
	case runs > 1:
		iv.fail("%s call %d (token %s, execution %s) ran %d times (ended %s)", o.kind, o.n, o.token, o.exec, runs, ended)
	case ended == "success" && runs != 1:
		iv.fail("%s call %d (token %s) ended success but ran %d times", o.kind, o.n, o.token, runs)
	case !o.accepted() && o.key == "" && runs != 0 && o.a != nil && o.a.status >= 400:
		iv.fail("%s call %d (token %s) was refused %d %s but ran", o.kind, o.n, o.token, o.a.status, o.a.code())
	}
}

// checkDecision holds approvals and answers to one decision each. A
// decision is taken when a try is answered 200, or when one is answered
// 503 (or not at all) and a later one refused as decided: it may have
// been taken, and must then end — a resumption whose write landed after
// its 503 and whose step never ran is lost (all the stuck resumptions
// the harness found were such, and only "never ended" had flagged them);
// an answer that ended success must carry the answer sent.
func checkDecision(o *op, f *final, runs int, iv *invariant) {
	if o.kind != kindApproval && o.kind != kindAnswer || !o.accepted() || o.exec == "" {
		return
	}
	iv.checked++
	taken := o.applied > 0 || o.unknown > 0 && o.refused > 0
	switch {
	case o.unsettled:
		iv.fail("%s %s: no decision or answer could be given (the last try: %s)", o.kind, o.exec, o.lastTry)
	case o.applied > 1:
		iv.fail("%s %s: %d decisions or answers were each answered 200", o.kind, o.exec, o.applied)
	case f == nil && taken:
		iv.fail("%s %s: taken (%d answered 200, %d unknown, %d refused as decided after) but never ended", o.kind, o.exec,
			o.applied, o.unknown, o.refused)
	case f == nil:
	case o.kind == kindAnswer && (o.applied == 1 || taken && f.env.Status == "success") && !bytes.Contains(f.env.Data, []byte(`"`+o.answered+`"`)):
		iv.fail("answer %s ended %s with %s, not the answer %s", o.exec, f.env.Status, f.env.Data, o.answered)
	case o.kind == kindApproval && f.env.Status == "success" && runs != 1:
		iv.fail("approval %s (token %s) ended success but ran %d times", o.exec, o.token, runs)
	case o.kind == kindApproval && !o.approve && runs != 0:
		iv.fail("approval %s (token %s) was denied but ran %d times", o.exec, o.token, runs)
	case runs > 1:
		iv.fail("approval %s (token %s) ran %d times", o.exec, o.token, runs)
	}
}

// checkAudit verifies the log with toold audit verify, then requires the
// execution id of every accepted execution, and the request id of every
// call answered now, to be in it.
func (h *harness) checkAudit(ops []*op, iv *invariant) {
	url := clusterURL(h.nodes)
	out, err := exec.Command(h.bin, "audit", "verify", "-nats-url", url, "-public-key", h.keyFile+".pub").CombinedOutput()
	iv.checked++
	if err != nil {
		iv.fail("toold audit verify: %v: %s", err, firstLines(out, 5))
		return
	}
	fmt.Fprintf(h.out, "audit verify: %s", firstLines(out, 3))
	export := h.dir + "/audit.jsonl"
	if out, err := exec.Command(h.bin, "audit", "export", "-nats-url", url, "-o", export).CombinedOutput(); err != nil {
		iv.fail("toold audit export: %v: %s", err, firstLines(out, 5))
		return
	}
	seen := map[string]bool{}
	f, err := os.Open(export)
	if err != nil {
		iv.fail("%v", err)
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			RequestID     string `json:"request_id"`
			ExecutionID   string `json:"execution_id"`
			RecoveredFrom string `json:"recovered_from"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			seen[rec.RequestID], seen[rec.ExecutionID] = true, true
			if rec.RecoveredFrom != "" {
				h.recovered++
			}
			// A batch's calls are recorded under "<its request id>.<call id>".
			if i := strings.LastIndexByte(rec.RequestID, '.'); i > 0 {
				seen[rec.RequestID[:i]] = true
			}
		}
	}
	delete(seen, "")
	for _, o := range ops {
		if !o.accepted() {
			continue
		}
		// An execution's runs carry its id; the request that made it (a
		// call parked for a person, a batch) its request id.
		if o.exec == "" && o.a.env.RequestID == "" {
			continue
		}
		iv.checked++
		if !seen[o.exec] && !seen[o.a.env.RequestID] {
			if o.exec == "" && h.killedSoonAfter(o, o.a.replayed) {
				// A call answered now, whose record was still in its
				// replica's buffer (flushed every 50ms, off the call's
				// path) when the replica was SIGKILLed: the documented
				// bound, counted apart.
				h.unflushed++
				continue
			}
			iv.fail("%s call %d (execution %q, request %q, answered %d by %s at %s) is not in the audit log", o.kind, o.n,
				o.exec, o.a.env.RequestID, o.a.status, o.replica, o.end.Format("15:04:05.000"))
		}
	}
}

// killedSoonAfter reports whether the replica that answered o was
// SIGKILLed within a second of the answer — any replica, for a replayed
// answer (the replica that ran the call is not the one that replayed it).
// (o.end is after the first answer: the kill may come before it.)
func (h *harness) killedSoonAfter(o *op, anyReplica bool) bool {
	for _, k := range h.kills {
		if (anyReplica || k.replica == o.replica) && k.at.Sub(o.start) > -time.Second && k.at.Sub(o.end) < time.Second {
			return true
		}
	}
	return false
}

// checkQuorum holds the calls made while two nodes of three were down.
func (h *harness) checkQuorum(ops []*op, iv *invariant) {
	for _, f := range h.faults {
		from, to := f.storeDown[0], f.storeDown[1]
		if from.IsZero() || !to.After(from) {
			continue
		}
		for _, o := range ops {
			if o.start.Before(from) || o.end.After(to) || o.key != "" {
				continue
			}
			iv.checked++
			switch {
			case !needsStore(o.kind):
				if o.a.status != 200 {
					iv.fail("%s call %d during %s: %d %s, want 200 (it needs no store)", o.kind, o.n, f.name, o.a.status, o.a.code())
				}
			case o.a.status != 503 || o.a.code() != "store_unavailable" || o.a.retryAfter == "":
				iv.fail("%s call %d during %s: %d %q Retry-After %q, want 503 store_unavailable with Retry-After",
					o.kind, o.n, f.name, o.a.status, o.a.code(), o.a.retryAfter)
			}
		}
	}
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitAfterN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "")
}
