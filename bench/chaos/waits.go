//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// waitsRun opens waits on the cluster, in steps up to each count of
// -waits, and at each count measures what they cost and whether the
// store still delivers: the resident memory of every toold replica and
// NATS node per open wait, the latency of a resumption (answered, its
// step run, its end returned: Prefer: wait=10 on POST .../resume), and of
// an async call through the queue. The waits are request_user_input calls
// parked by their replica (202, waiting for an answer), made by 48
// callers spread over the replicas.
func waitsRun(o options, out io.Writer) error {
	var levels []int
	for _, f := range strings.Split(o.waits, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-waits %q: want counts such as 10000,100000,1000000", o.waits)
		}
		levels = append(levels, n)
	}
	slices.Sort(levels)
	dir, err := os.MkdirTemp("", "toold-waits-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(out, "run directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	h, err := setup(dir, o.bin, o.replicas, false, 64<<30, out)
	if err != nil {
		return err
	}
	defer h.close()
	h.logf("cluster %s, %d replicas", clusterURL(h.nodes), o.replicas)
	c := newClient(agentKey)
	var ids []string
	fmt.Fprintf(out, "\n| open waits | toold RSS (live heap), all replicas | NATS RSS (3 nodes) | per wait: toold heap / NATS RSS | resumption p50 / p99 / max | async call p50 | failed |\n|---|---|---|---|---|---|---|\n")
	base := h.measure(c, nil, 0)
	fmt.Fprintln(out, base.row(0, base))
	for _, n := range levels {
		if interrupted.Load() {
			return fmt.Errorf("interrupted")
		}
		start := time.Now()
		opened, err := h.openWaits(c, n-len(ids))
		ids = append(ids, opened...)
		if err != nil {
			return err
		}
		h.logf("%d waits open (%d made in %v)", len(ids), len(opened), time.Since(start).Round(time.Second))
		m := h.measure(c, ids, len(ids))
		fmt.Fprintln(out, m.row(len(ids), base))
		if m.why != "" {
			h.logf("  first failure: %s", m.why)
		}
	}
	return nil
}

// openWaits parks n request_user_input calls from 48 callers and returns
// their execution ids; it stops at the first refusal it cannot retry.
func (h *harness) openWaits(c *client, n int) ([]string, error) {
	ids := make([]string, n)
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for w := range 48 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for i := int(next.Add(1)) - 1; i < n && !interrupted.Load(); i = int(next.Add(1)) - 1 {
				for attempt := 0; ; attempt++ {
					r := h.pick(rng)
					a := c.do("POST", r.url+"/tools/request_user_input/execute", `{"prompt":"may I go on?"}`)
					if a.status == 202 && a.env.ExecutionID != "" {
						ids[i] = a.env.ExecutionID
						break
					}
					if attempt == 5 || bad.Add(1) > 1000 {
						firstErr.CompareAndSwap(nil, fmt.Sprintf("a wait was refused: %d %s", a.status, a.body))
						next.Store(int64(n))
						return
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if e := firstErr.Load(); e != nil {
		return slices.DeleteFunc(ids, func(s string) bool { return s == "" }), fmt.Errorf("%s", e)
	}
	return ids, nil
}

// level is what one count of open waits measured.
type level struct {
	tooldRSS, natsRSS int64
	tooldHeap         int64 // live heap of every replica after a collection
	resume, async     []time.Duration
	failed            int
	why               string // the first failure
}

func (m *level) fail(what string, a *answer) {
	if m.failed++; m.why == "" {
		m.why = fmt.Sprintf("%s: %d %.200s", what, a.status, a.body)
	}
}

// measure reads the processes' memory once the cluster is quiet, then
// times 100 resumptions of random open waits and 100 async calls, one at
// a time.
func (h *harness) measure(c *client, ids []string, open int) level {
	time.Sleep(3 * time.Second) // let the flushers and the nodes settle
	var m level
	for _, r := range h.replicas {
		m.tooldRSS += rss(r.cmd.Process.Pid)
		m.tooldHeap += liveHeap(r.admin)
	}
	for _, n := range h.nodes {
		m.natsRSS += rss(n.Pid())
	}
	rng := rand.New(rand.NewPCG(uint64(open), 1))
	// Each try waits 10s at most; five failures in a row mean delivery
	// stalled, and the rest are not tried (bounded: a stalled level would
	// otherwise take half an hour).
	for i := 0; i < 100 && len(ids) > 0 && m.failed < 5 && !interrupted.Load(); i++ {
		j := rng.IntN(len(ids))
		id := ids[j]
		ids[j] = ids[len(ids)-1]
		ids = ids[:len(ids)-1]
		r := h.pick(rng)
		t0 := time.Now()
		a := c.do("POST", r.url+"/executions/"+id+"/resume", `{"answer":"yes"}`, "Prefer", "wait=10")
		if a.status != 200 || a.env.Status != "success" {
			m.fail("a resumption", a)
			continue
		}
		m.resume = append(m.resume, time.Since(t0))
	}
	for i := 0; i < 100 && m.failed < 10; i++ {
		r := h.pick(rng)
		t0 := time.Now()
		a := c.do("POST", r.url+"/tools/echo/execute", `{"message":"still delivered?"}`, "Prefer", "respond-async, wait=10")
		if a.status != 200 || a.env.Status != "success" {
			m.fail("an async call", a)
			continue
		}
		m.async = append(m.async, time.Since(t0))
	}
	return m
}

func (m level) row(open int, base level) string {
	const mib = 1 << 20
	per := func(now, was int64) string {
		if open == 0 {
			return "—"
		}
		return fmt.Sprintf("%.0f B", float64(now-was)/float64(open))
	}
	return fmt.Sprintf("| %d | %.0f MiB (%.0f MiB) | %.0f MiB | %s / %s | %s | %s | %d |", open, float64(m.tooldRSS)/mib, float64(m.tooldHeap)/mib,
		float64(m.natsRSS)/mib, per(m.tooldHeap, base.tooldHeap), per(m.natsRSS, base.natsRSS), quantiles(m.resume, .5, .99, 1),
		quantiles(m.async, .5), m.failed)
}

// quantiles formats the qs of ds, "—" for none.
func quantiles(ds []time.Duration, qs ...float64) string {
	if len(ds) == 0 {
		return "—"
	}
	slices.Sort(ds)
	var parts []string
	for _, q := range qs {
		i := min(int(q*float64(len(ds))), len(ds)-1)
		parts = append(parts, ds[i].Round(100*time.Microsecond).String())
	}
	return strings.Join(parts, " / ")
}

// liveHeap asks a toold for a heap profile after a collection
// (/debug/pprof/heap?gc=1, text form) and returns its live bytes: what the
// process keeps, whatever the collector has not given back to the system.
func liveHeap(admin string) int64 {
	resp, err := http.Get(admin + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() { // its runtime.MemStats, at the end: "# HeapAlloc = 12345"
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// rss is a process's resident set, in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
