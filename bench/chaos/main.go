//go:build linux

// Command chaos is toold's fault harness. On one machine, on loopback
// only, it runs a three-node NATS cluster (real nats-server processes
// built from the module toold embeds; streams with three replicas) and
// two or three toold replicas (built from ./cmd/toold), drives them with
// a mixed load — sync, async, async waiting for its end, batch, calls
// under an Idempotency-Key, calls waiting for a person's approval or an
// answer — and injects a schedule of faults:
//
//   - replica-kill: SIGKILL a replica mid-load, then start it again;
//   - nats-node-kill: SIGKILL a NATS node, then start it again;
//   - stream-leader-kill: the same for the node leading the executions
//     bucket's stream;
//   - quorum-loss: two nodes of three down for 15s, then back;
//   - disk-full: one node's store (a small tmpfs) filled until its
//     JetStream gives up, then freed and the node restarted;
//   - replica-paused: SIGSTOP a replica past its lease, then SIGCONT.
//
// After the load it reads every accepted execution back from every
// replica, counts how often each non-idempotent call ran (its command
// appends a token to a file), verifies the audit log, and prints the
// invariants as a table; it exits 1 if any broke.
//
//	go run ./bench/chaos                    # the full schedule (about 3 minutes)
//	go run ./bench/chaos -schedule short    # one replica kill, one NATS node kill
//	go run ./bench/chaos -schedule overlap -workers 8 -calm 2s  # a replica and a node at once, then another node (overlap.go)
//
// It needs root for the tmpfs (disk-full is skipped without it). Every
// loop is bounded in count and time; every process it starts is its own.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// interrupted is set by SIGINT or SIGTERM: the run stops its load and
// faults and cleans up.
var interrupted atomic.Bool

// options of a run.
type options struct {
	schedule string
	replicas int
	workers  int
	calm     time.Duration // load between faults
	keep     bool
	bin      string // a toold binary to run instead of building one
	waits    string // measure open waits at these counts instead (waits.go)
}

func main() {
	var o options
	flag.StringVar(&o.schedule, "schedule", "full", "faults to inject: full, short or overlap (issue 38's: two faults at once, then a second node lost)")
	flag.IntVar(&o.replicas, "replicas", 2, "toold replicas (2 or 3)")
	flag.IntVar(&o.workers, "workers", 12, "concurrent callers of the load")
	flag.DurationVar(&o.calm, "calm", 5*time.Second, "load before, between and after the faults")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (logs, stores, marks)")
	flag.StringVar(&o.bin, "bin", "", "run this toold binary instead of building ./cmd/toold (to compare two builds)")
	flag.StringVar(&o.waits, "waits", "", "instead of faults, open this many waits in steps (e.g. 10000,100000,1000000) and measure each")
	flag.Parse()
	log.SetFlags(0)
	// Interrupted, the harness still stops what it started (deferred
	// closes run when run returns; this makes it return).
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	go func() { <-stop; interrupted.Store(true) }()
	if o.waits != "" {
		if err := waitsRun(o, os.Stdout); err != nil {
			log.Fatal("chaos: ", err)
		}
		return
	}
	res, err := run(o, os.Stdout)
	if err != nil {
		log.Fatal("chaos: ", err)
	}
	if !res.ok() {
		os.Exit(1)
	}
}

// run is one whole run: setup, load and faults, checks, the tables.
func run(o options, out io.Writer) (*results, error) {
	if o.schedule == "overlap" {
		return overlapRun(o, out)
	}
	faults, ok := schedules[o.schedule]
	if !ok {
		return nil, fmt.Errorf("-schedule %q: want full, short or overlap", o.schedule)
	}
	if o.replicas < 2 || o.replicas > 3 {
		return nil, fmt.Errorf("-replicas %d: want 2 or 3", o.replicas)
	}
	dir, err := os.MkdirTemp("", "toold-chaos-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		fmt.Fprintln(out, "run directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	start := time.Now()
	h, err := setup(dir, o.bin, o.replicas, true, tmpfsBytes*3/4, out)
	if err != nil {
		return nil, err
	}
	defer h.close()
	h.logf("cluster %s, %d replicas; load of %d callers", clusterURL(h.nodes), o.replicas, o.workers)
	l := newLoad(h)
	l.run(o.workers)
	time.Sleep(o.calm)
	for _, name := range faults {
		if interrupted.Load() {
			break
		}
		before := len(l.snapshot())
		f := h.inject(name)
		f.callsDuring = len(l.snapshot()) - before
		h.faults = append(h.faults, f)
		time.Sleep(o.calm)
	}
	l.finish()
	h.logf("load done: %d calls; checking", len(l.ops))
	res := h.check(l.ops)
	report(out, h, l.ops, res, time.Since(start))
	return res, nil
}

func (l *load) snapshot() []*op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ops
}

// report prints the faults, the calls and the invariants as tables.
func report(out io.Writer, h *harness, ops []*op, res *results, took time.Duration) {
	fmt.Fprintf(out, "\n| fault | healed after | calls during | note |\n|---|---|---|---|\n")
	for _, f := range h.faults {
		note := f.skipped + f.problem
		if !f.storeDown[0].IsZero() {
			note += refusals(ops, f)
		}
		if note == "" {
			note = "—"
		}
		fmt.Fprintf(out, "| %s | %v | %d | %s |\n", f.name, f.end.Sub(f.start).Round(100*time.Millisecond), f.callsDuring, note)
	}
	byKind := map[string][3]int{} // accepted, refused, unanswered
	for _, o := range ops {
		c := byKind[o.kind]
		switch {
		case o.accepted():
			c[0]++
		case o.a.status == 0:
			c[2]++
		default:
			c[1]++
		}
		byKind[o.kind] = c
	}
	fmt.Fprintf(out, "\n| call | accepted (200/202) | refused | no answer |\n|---|---|---|---|\n")
	for _, m := range mix {
		c := byKind[m.kind]
		fmt.Fprintf(out, "| %s | %d | %d | %d |\n", m.kind, c[0], c[1], c[2])
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
			if i == 20 {
				fmt.Fprintf(out, "  ... and %d more\n", len(iv.violations)-20)
				break
			}
			fmt.Fprintf(out, "  ✘ %s\n", v)
		}
	}
	if h.unflushed > 0 {
		fmt.Fprintf(out, "\n%d call(s) answered now (sync) by a replica SIGKILLed less than a second later are not in the audit log: "+
			"their records were in its buffer, flushed every 50ms off the call's path (docs/reliability.md)\n", h.unflushed)
	}
	if h.recovered > 0 {
		fmt.Fprintf(out, "\n%d audit record(s) of executions' ends written by another replica for a lost one (its audit lease fired; "+
			"marked recovered_from, docs/executions.md)\n", h.recovered)
	}
	fmt.Fprintf(out, "\n%d calls, %s, in %v\n", len(ops), strings.Join(faultNames(h.faults), ", "), took.Round(time.Second))
}

// refusals says how long the calls made while the store was down took
// to be refused.
func refusals(ops []*op, f *fault) string {
	var took []time.Duration
	for _, o := range ops {
		if o.start.After(f.storeDown[0]) && o.end.Before(f.storeDown[1]) && o.a.status == 503 {
			took = append(took, o.end.Sub(o.start))
		}
	}
	if len(took) == 0 {
		return "no call refused while the store was down"
	}
	slices.Sort(took)
	return fmt.Sprintf("%d calls refused 503 in %v (median), %v at most", len(took),
		took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
}

func faultNames(fs []*fault) []string {
	var names []string
	for _, f := range fs {
		names = append(names, f.name)
	}
	return names
}
