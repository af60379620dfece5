//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// The overlap schedule is the fault run of issue 38, tried as an operator
// would: eight clients send async sleep calls (150 ms, Prefer:
// respond-async) to both replicas; one second in, replica A and one NATS
// node are SIGKILLed together; two seconds later that node starts again;
// two seconds after that another node dies while the first one catches up
// (two of three stay: quorum holds). Replica A and the second node stay
// down. Every execution answered 202 is then read on replica B until it is
// final. No accepted execution may end rejected or for the store's sake: a
// sleep is idempotent, so one lost with A runs again on B; only a store
// away past the call's own deadline may end it, interrupted or timeout,
// saying why.
//
// Every write of an execution record sent to the cluster is kept in
// history.log (with -keep, beside each process's log), and a broken
// execution's history is printed with it.

// overlap is when each step of the schedule happens, from the load's
// start.
var overlap = struct {
	first, restart, second time.Duration
}{first: time.Second, restart: 3 * time.Second, second: 5 * time.Second}

const (
	invOverlapFinal = "every execution answered 202 reaches a final state, read on replica B"
	invOverlapEnd   = "no accepted execution ends rejected or for the store's sake; only its deadline ends it otherwise, saying why"
)

// overlapOp is one async call of the overlap load.
type overlapOp struct {
	n          int
	replica    string
	start, end time.Time
	a          *answer
	// What reading it on replica B found.
	final    *answer
	reads    int
	refusals map[string]int // "503 rejected store_unavailable" → how often
	// misread is the first read that was not 200 but whose envelope
	// named a final status: what a client reading until final stops at.
	misread *answer
}

// overlapRun runs the overlap schedule once; o.calm is the load after
// the last fault.
func overlapRun(o options, out io.Writer) (*results, error) {
	dir, err := os.MkdirTemp("", "toold-overlap-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		fmt.Fprintln(out, "run directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	h, err := setup(dir, o.bin, 2, false, tmpfsBytes*3/4, out)
	if err != nil {
		return nil, err
	}
	defer h.close()
	hist, err := watchHistory(h.nc, filepath.Join(dir, "history.log"))
	if err != nil {
		return nil, err
	}
	defer hist.stop()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38))
	first := h.nodes[rng.IntN(len(h.nodes))]
	second := first
	for second == first {
		second = h.nodes[rng.IntN(len(h.nodes))]
	}
	a, b := h.replicas[0], h.replicas[1]
	h.logf("cluster %s; %d callers of sleep (150ms, async) on %s and %s; %s then %s die", clusterURL(h.nodes), o.workers, a.name, b.name,
		first.Name, second.Name)

	var mu sync.Mutex
	var ops []*overlapOp
	stop := make(chan struct{})
	var wg sync.WaitGroup
	c := newClient(agentKey)
	for w := range o.workers {
		wg.Go(func() {
			wrng := rand.New(rand.NewPCG(uint64(w), 38))
			for i := 0; i < 100_000 && !interrupted.Load(); i++ { // bounded; stop ends it long before
				select {
				case <-stop:
					return
				default:
				}
				r := h.pick(wrng)
				if r == nil {
					return
				}
				op := &overlapOp{replica: r.name, start: time.Now()}
				op.a = c.do("POST", r.url+"/tools/sleep/execute", `{"ms":150}`, "Prefer", "respond-async")
				op.end = time.Now()
				mu.Lock()
				op.n = len(ops) + 1
				ops = append(ops, op)
				mu.Unlock()
				if op.a.status == 0 || op.a.status >= 500 {
					time.Sleep(20 * time.Millisecond) // do not spin against a replica that is down
				}
			}
		})
	}
	t0 := time.Now()
	f := &fault{name: "overlap", start: t0.Add(overlap.first)}
	at := func(d time.Duration) { time.Sleep(time.Until(t0.Add(d))) }
	at(overlap.first)
	h.logf("SIGKILL %s and %s", a.name, first.Name)
	h.setServing(a, false)
	h.mu.Lock()
	h.kills = append(h.kills, kill{a.name, time.Now()})
	h.mu.Unlock()
	first.Kill()
	a.kill()
	at(overlap.restart)
	h.logf("start %s", first.Name)
	if err := first.Start(); err != nil {
		f.problem = err.Error()
	}
	at(overlap.second)
	h.logf("SIGKILL %s (%s catching up)", second.Name, first.Name)
	second.Kill()
	time.Sleep(o.calm)
	close(stop)
	wg.Wait()
	f.end = time.Now()
	h.faults = append(h.faults, f)
	accepted := 0
	for _, op := range ops {
		if op.a.status == 202 {
			accepted++
		}
	}
	h.logf("load done: %d calls, %d answered 202; reading them on %s", len(ops), accepted, b.name)
	readOnB(c, b, ops)
	hist.stop()
	res := checkOverlap(ops, hist)
	reportOverlap(out, ops, res, hist, time.Since(start))
	return res, nil
}

// readOnB reads every execution answered 202 on replica b until it is
// final, as an operator's client would: GET, and again every 200ms while
// it is not, within two minutes for all of them. An answer that is not 200
// is read again, and kept: its envelope's status is what a client that
// trusts it would take for the execution's.
func readOnB(c *client, b *replica, ops []*overlapOp) {
	deadline := time.Now().Add(2 * time.Minute)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, op := range ops {
		if op.a.status != 202 || op.a.env.ExecutionID == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			op.refusals = map[string]int{}
			for time.Now().Before(deadline) && !interrupted.Load() {
				a := c.do("GET", b.url+"/executions/"+op.a.env.ExecutionID, "")
				op.reads++
				if a.status == 200 && isFinal(a.env.Status) {
					op.final = a
					return
				}
				if a.status != 200 {
					op.refusals[fmt.Sprintf("%d %s %s", a.status, a.env.Status, a.code())]++
					if isFinal(a.env.Status) && op.misread == nil {
						op.misread = a
					}
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// checkOverlap holds every execution answered 202 to one final state
// on B, and that state to what an accepted sleep may end with.
func checkOverlap(ops []*overlapOp, hist *history) *results {
	res := &results{by: map[string]*invariant{}}
	for _, name := range []string{invOverlapFinal, invOverlapEnd} {
		iv := &invariant{name: name}
		res.list = append(res.list, iv)
		res.by[name] = iv
	}
	for _, op := range ops {
		if op.a.status != 202 {
			continue
		}
		id := op.a.env.ExecutionID
		res.by[invOverlapFinal].checked++
		if op.final == nil {
			res.by[invOverlapFinal].fail("call %d (execution %s, accepted on %s) never read final on B in %d reads (refused: %v)%s",
				op.n, id, op.replica, op.reads, op.refusals, hist.of(id))
			continue
		}
		res.by[invOverlapEnd].checked++
		if m := op.misread; m != nil && m.env.Status != op.final.env.Status {
			res.by[invOverlapEnd].fail("call %d (execution %s, accepted on %s at %s): a read on B answered %d saying %s %s, before it read %s%s",
				op.n, id, op.replica, op.end.Format("15:04:05.000"), m.status, m.env.Status, m.code(), op.final.env.Status, hist.of(id))
			continue
		}
		if why := overlapEndBroken(op.final); why != "" {
			res.by[invOverlapEnd].fail("call %d (execution %s, accepted on %s at %s): %s%s", op.n, id, op.replica,
				op.end.Format("15:04:05.000"), why, hist.of(id))
		}
	}
	return res
}

// overlapEndBroken says what is wrong with an accepted sleep's end: only
// success, or interrupted or timeout with a reason that is not the store
// being away, are ends it may have.
func overlapEndBroken(a *answer) string {
	status, code, msg := a.env.Status, "", ""
	if e := a.env.Error; e != nil {
		code, msg = e.Code, e.Message
	}
	switch {
	case status == "success":
		return ""
	case code == "store_unavailable" || code == "store_full":
		return fmt.Sprintf("ended %s %s: for the store's sake", status, code)
	case status != "interrupted" && status != "timeout":
		return fmt.Sprintf("ended %s %s (%s)", status, code, msg)
	case code == "" || msg == "":
		return fmt.Sprintf("ended %s without saying why", status)
	}
	return ""
}

func reportOverlap(out io.Writer, ops []*overlapOp, res *results, hist *history, took time.Duration) {
	byStatus := map[string]int{}
	refused := map[string]int{}
	readRefusals := map[string]int{}
	for _, op := range ops {
		switch {
		case op.a.status == 202 && op.final != nil:
			s := op.final.env.Status
			if e := op.final.env.Error; e != nil {
				s += " " + e.Code
			}
			byStatus[s]++
		case op.a.status == 202:
			byStatus["never final"]++
		default:
			refused[fmt.Sprintf("%d %s", op.a.status, op.a.code())]++
		}
		for k, n := range op.refusals {
			readRefusals[k] += n
		}
	}
	table := func(title string, m map[string]int) {
		fmt.Fprintf(out, "\n| %s | calls |\n|---|---|\n", title)
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range m {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			fmt.Fprintf(out, "| %s | %d |\n", k, m[k])
		}
	}
	table("accepted (202), ended on B", byStatus)
	table("not accepted", refused)
	if len(readRefusals) > 0 {
		table("reads on B refused (then read again)", readRefusals)
	}
	fmt.Fprintf(out, "\n| invariant | checked | violations | |\n|---|---|---|---|\n")
	for _, iv := range res.list {
		mark := "✔"
		if len(iv.violations) > 0 {
			mark = "✘"
		}
		fmt.Fprintf(out, "| %s | %d | %d | %s |\n", iv.name, iv.checked, len(iv.violations), mark)
	}
	for _, iv := range res.list {
		for i, v := range iv.violations {
			if i == 10 {
				fmt.Fprintf(out, "  ... and %d more\n", len(iv.violations)-10)
				break
			}
			fmt.Fprintf(out, "  ✘ %s\n", v)
		}
	}
	fmt.Fprintf(out, "\n%d calls, %d record writes seen, in %v\n", len(ops), hist.count(), took.Round(time.Second))
}

// history keeps every write of an execution record sent to the cluster,
// as a client of the cluster sees it go by (a subscription to the
// bucket's subjects): the record each write carries, and the revision it
// expected, whether or not the store took it. It is kept in memory by
// execution id and in a file.
type history struct {
	mu   sync.Mutex
	by   map[string][]string
	n    int
	sub  *nats.Subscription
	file *os.File
	once sync.Once
}

// watchHistory starts keeping every write of the executions bucket.
func watchHistory(nc *nats.Conn, file string) (*history, error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	h := &history{by: map[string][]string{}, file: f}
	h.sub, err = nc.Subscribe("$KV.toold_executions.>", func(m *nats.Msg) {
		line := revision(m)
		_, id, _ := strings.Cut(strings.TrimPrefix(m.Subject, "$KV.toold_executions."), ".")
		h.mu.Lock()
		defer h.mu.Unlock()
		fmt.Fprintln(h.file, line)
		h.by[id] = append(h.by[id], line)
		h.n++
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	_ = h.sub.SetPendingLimits(-1, -1)
	return h, nil
}

// revision is one write of a record, as the history keeps it: when it
// went by, the revision it expected, and the record's fields that say
// where the execution stood.
func revision(m *nats.Msg) string {
	at := time.Now().Format("15:04:05.000")
	expect := m.Header.Get("Nats-Expected-Last-Subject-Sequence")
	if expect == "" {
		expect = "any"
	}
	if op := m.Header.Get("KV-Operation"); op != "" {
		return fmt.Sprintf("%s %s %s (expecting rev %s)", at, m.Subject, op, expect)
	}
	var r struct {
		ID        string    `json:"id"`
		Status    string    `json:"status"`
		Replica   string    `json:"replica"`
		Attempt   int       `json:"attempt"`
		Step      int       `json:"step"`
		Cancel    bool      `json:"cancel_requested"`
		UpdatedAt time.Time `json:"updated_at"`
		Envelope  struct {
			Error *struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		} `json:"envelope"`
	}
	_ = json.Unmarshal(m.Data, &r)
	s := fmt.Sprintf("%s %s %s on %s attempt %d step %d, stamped %s, expecting rev %s", at, r.ID, r.Status, r.Replica, r.Attempt, r.Step,
		r.UpdatedAt.Local().Format("15:04:05.000"), expect)
	if r.Cancel {
		s += ", cancel requested"
	}
	if er := r.Envelope.Error; er != nil {
		s += fmt.Sprintf(": %s %q", er.Code, er.Message)
	}
	return s
}

// stop ends the watch and closes its file (once).
func (h *history) stop() {
	h.once.Do(func() {
		_ = h.sub.Unsubscribe()
		h.mu.Lock()
		defer h.mu.Unlock()
		h.file.Close()
	})
}

func (h *history) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// of is an execution's history, one revision a line, for a violation.
func (h *history) of(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	revs := h.by[id]
	if len(revs) == 0 {
		return "\n      (no revision watched)"
	}
	return "\n      " + strings.Join(revs, "\n      ")
}
