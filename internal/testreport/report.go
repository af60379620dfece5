package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// module is trimmed from package paths when they are printed.
const module = "github.com/toold/toold/"

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time       time.Time `json:"Time,omitzero"`
	Action     string    `json:"Action"`
	Package    string    `json:"Package,omitempty"`
	ImportPath string    `json:"ImportPath,omitempty"`
	Test       string    `json:"Test,omitempty"`
	Output     string    `json:"Output,omitempty"`
	Elapsed    float64   `json:"Elapsed,omitempty"`
}

// maxLines bounds the output kept of one test (or package) until it ends:
// a failure shows its last lines.
const maxLines = 400

// pkgState is a package as far as the run got.
type pkgState struct {
	name                   string
	start                  time.Time
	tests, skipped, failed int
	done, fail             bool
	elapsed                time.Duration
	out                    map[string][]string // a running test's output
	pkgOut                 []string            // output outside any test
}

// skip is a test that skipped, and why.
type skip struct{ test, reason string }

// report is a run's tally; safe for the heartbeat's concurrent reads.
type report struct {
	w           io.Writer
	mu          sync.Mutex
	first, last time.Time
	pkgs        map[string]*pkgState
	order       []string
	tests       int
	passed      int
	failedTests int
	skips       []skip
	buildFailed bool
	kept        []event // the compact run (-save)
}

func newReport(w io.Writer) *report { return &report{w: w, pkgs: map[string]*pkgState{}} }

// read consumes a `go test -json` stream; a line that is not an event
// (the go command's own messages) is printed as it is.
func (r *report) read(src io.Reader) error {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
			r.mu.Lock()
			fmt.Fprintf(r.w, "%s\n", line)
			r.mu.Unlock()
			continue
		}
		r.mu.Lock()
		r.handle(ev)
		r.mu.Unlock()
	}
	return sc.Err()
}

func (r *report) pkg(name string, at time.Time) *pkgState {
	p := r.pkgs[name]
	if p == nil {
		p = &pkgState{name: name, start: at, out: map[string][]string{}}
		r.pkgs[name] = p
		r.order = append(r.order, name)
	}
	return p
}

func (r *report) handle(ev event) {
	switch ev.Action {
	case "build-output":
		fmt.Fprint(r.w, ev.Output)
		return
	case "build-fail":
		r.buildFailed = true
		return
	}
	if ev.Package == "" {
		return
	}
	p := r.pkg(ev.Package, ev.Time)
	switch ev.Action {
	case "start":
		r.seen(ev.Time)
		r.kept = append(r.kept, event{Time: ev.Time, Action: "start", Package: ev.Package})
	case "output":
		if ev.Test == "" {
			p.pkgOut = keep(p.pkgOut, ev.Output)
		} else {
			p.out[ev.Test] = keep(p.out[ev.Test], ev.Output)
		}
	case "pass", "fail", "skip":
		if ev.Test == "" {
			r.packageEnded(p, ev)
		} else {
			r.testEnded(p, ev)
		}
	}
}

// keep appends a line, dropping the oldest past maxLines.
func keep(lines []string, s string) []string {
	if len(lines) >= maxLines {
		lines = append(lines[:0], lines[1:]...)
	}
	return append(lines, s)
}

func (r *report) testEnded(p *pkgState, ev event) {
	out := p.out[ev.Test]
	delete(p.out, ev.Test)
	r.tests++
	p.tests++
	c := event{Action: ev.Action, Package: ev.Package, Test: ev.Test}
	switch ev.Action {
	case "pass":
		r.passed++
	case "skip":
		p.skipped++
		why := skipReason(out)
		r.skips = append(r.skips, skip{test: short(ev.Package) + " " + ev.Test, reason: why})
		r.kept = append(r.kept, event{Action: "output", Package: ev.Package, Test: ev.Test, Output: why + "\n"})
	case "fail":
		r.failedTests++
		p.failed++
		fmt.Fprintf(r.w, "--- FAIL %s %s\n%s", short(ev.Package), ev.Test, strings.Join(out, ""))
	}
	r.kept = append(r.kept, c)
}

// seen widens the run's span to t: the first package's start to the
// last one's end (what a compact run keeps too).
func (r *report) seen(t time.Time) {
	if t.IsZero() {
		return
	}
	if r.first.IsZero() || t.Before(r.first) {
		r.first = t
	}
	if t.After(r.last) {
		r.last = t
	}
}

func (r *report) packageEnded(p *pkgState, ev event) {
	r.seen(ev.Time)
	p.done, p.fail = true, ev.Action == "fail"
	p.elapsed = time.Duration(ev.Elapsed * float64(time.Second))
	r.kept = append(r.kept, event{Time: ev.Time, Action: ev.Action, Package: ev.Package, Elapsed: ev.Elapsed})
	switch {
	case p.fail:
		fmt.Fprintf(r.w, "FAIL  %-36s %8s  %s\n%s", short(p.name), p.elapsed.Round(100*time.Millisecond), p.counts(),
			strings.Join(p.pkgOut, ""))
	case p.tests > 0:
		fmt.Fprintf(r.w, "ok    %-36s %8s  %s\n", short(p.name), p.elapsed.Round(100*time.Millisecond), p.counts())
	}
	p.pkgOut, p.out = nil, nil
}

func (p *pkgState) counts() string {
	s := plural(p.tests, "test")
	if p.skipped > 0 {
		s += fmt.Sprintf(", %d skipped", p.skipped)
	}
	if p.failed > 0 {
		s += fmt.Sprintf(", %d failed", p.failed)
	}
	return s
}

// fileLine is the file:line: prefix testing puts on a test's log lines.
var fileLine = regexp.MustCompile(`^\S+\.go:\d+:(\s|$)`)

// skipReason is why a test skipped, from its output: the line saying
// SKIPPED: (testpeer's missing peers), else the last line it logged
// (t.Skip's message comes last), without the file:line prefix.
func skipReason(out []string) string {
	var last string
	for _, line := range out {
		s := strings.TrimSpace(line)
		if strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ") {
			continue
		}
		if s = strings.TrimSpace(fileLine.ReplaceAllString(s, "")); s == "" {
			continue
		}
		if _, why, ok := strings.Cut(s, "SKIPPED: "); ok {
			return clip(why)
		}
		last = s
	}
	if last == "" {
		return "(no reason given)"
	}
	return clip(last)
}

// clip keeps a reason to one line of at most 260 characters.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 260 {
		s = string(r[:259]) + "…"
	}
	return s
}

func short(pkg string) string { return strings.TrimPrefix(pkg, module) }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%s %ss", thousands(n), what)
}

// thousands writes n with commas: 3,012.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// heartbeat names the packages still running every d until stopped.
func (r *report) heartbeat(d time.Duration) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	began := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				r.mu.Lock()
				fmt.Fprintln(r.w, r.progress(now, now.Sub(began)))
				r.mu.Unlock()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// progress is the heartbeat's line: how long the run has taken, the
// packages done, and each one still running with its time and tests.
func (r *report) progress(now time.Time, took time.Duration) string {
	var done int
	var running []*pkgState
	for _, name := range r.order {
		switch p := r.pkgs[name]; {
		case p.done:
			done++
		default:
			running = append(running, p)
		}
	}
	s := fmt.Sprintf("… %s: %s done, %s so far (%d skipped, %d failed)", took.Round(time.Second), plural(done, "package"),
		plural(r.tests, "test"), len(r.skips), r.failedTests)
	if len(running) == 0 {
		return s + "; building"
	}
	slices.SortFunc(running, func(a, b *pkgState) int { return a.start.Compare(b.start) })
	var names []string
	for _, p := range running {
		names = append(names, fmt.Sprintf("%s %s (%s)", short(p.name), now.Sub(p.start).Round(time.Second), plural(p.tests, "test")))
	}
	return s + "; running: " + strings.Join(names, ", ")
}

// failed reports whether a test, a package or a build failed.
func (r *report) failed() bool {
	if r.failedTests > 0 || r.buildFailed {
		return true
	}
	for _, p := range r.pkgs {
		if p.fail {
			return true
		}
	}
	return false
}

// reasons groups the skips by reason, the most common first.
func (r *report) reasons() []reasonCount {
	by := map[string]int{}
	for _, s := range r.skips {
		by[s.reason]++
	}
	out := make([]reasonCount, 0, len(by))
	for why, n := range by {
		out = append(out, reasonCount{why, n})
	}
	slices.SortFunc(out, func(a, b reasonCount) int { return cmp.Or(b.n-a.n, strings.Compare(a.why, b.why)) })
	return out
}

type reasonCount struct {
	why string
	n   int
}

// slowest are the n packages that took longest.
func (r *report) slowest(n int) []*pkgState {
	var ps []*pkgState
	for _, p := range r.pkgs {
		if p.done && p.tests > 0 {
			ps = append(ps, p)
		}
	}
	slices.SortFunc(ps, func(a, b *pkgState) int {
		return cmp.Or(cmp.Compare(b.elapsed, a.elapsed), strings.Compare(a.name, b.name))
	})
	return ps[:min(n, len(ps))]
}

// packages counts those that ran tests.
func (r *report) packages() int {
	n := 0
	for _, p := range r.pkgs {
		if p.tests > 0 {
			n++
		}
	}
	return n
}

// summary prints the run's counts and the skips by reason.
func (r *report) summary() {
	fmt.Fprintf(r.w, "\n%s in %s (subtests counted): %s passed, %s skipped, %s failed; %s\n", plural(r.tests, "test"),
		plural(r.packages(), "package"), thousands(r.passed), thousands(len(r.skips)), thousands(r.failedTests),
		r.last.Sub(r.first).Round(time.Second))
	if len(r.skips) > 0 {
		fmt.Fprintln(r.w, "skipped, by reason:")
		for _, rc := range r.reasons() {
			fmt.Fprintf(r.w, "%5d  %s\n", rc.n, rc.why)
		}
	}
}

// compact is the run as `go test -json` again, kept to what the summary
// and the README's block are made of: each package's start and end (with
// their times), each test's end, and a skipped test's reason.
func (r *report) compact() []byte {
	var b strings.Builder
	for _, ev := range r.kept {
		line, _ := json.Marshal(ev)
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}
