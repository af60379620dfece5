package main

import (
	"bufio"
	"bytes"
	"io"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// syncBuffer collects what toold writes, and tells waiters of each write,
// so a test waits for a line rather than sleeping until it might be there.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed (and replaced) at each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// next is the buffer's text and a channel closed at the next write.
func (s *syncBuffer) next() (string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.b.String(), s.changed
}

// await waits until re matches what was written, for d at most or until
// exited sends (the writer is gone: nothing more will come). It returns
// the match, nil when none came, and the error exited sent, if it did.
func (s *syncBuffer) await(re *regexp.Regexp, d time.Duration, exited <-chan error) ([]string, error) {
	timeout := time.NewTimer(d)
	defer timeout.Stop()
	for {
		text, changed := s.next()
		if m := re.FindStringSubmatch(text); m != nil {
			return m, nil
		}
		select {
		case <-changed:
		case err := <-exited:
			return nil, err
		case <-timeout.C:
			return nil, nil
		}
	}
}

// linesOf sends r's lines as they come, and closes at its end.
func linesOf(r io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// awaitLog waits (10 s at most) until toold's stdout or stderr matches re.
func (in *instance) awaitLog(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		out, outChanged := in.stdout.next()
		errs, errChanged := in.stderr.next()
		for _, text := range []string{out, errs} {
			if m := re.FindStringSubmatch(text); m != nil {
				return m
			}
		}
		select {
		case <-outChanged:
		case <-errChanged:
		case <-timeout.C:
			t.Fatalf("toold never wrote %s:\nstdout: %s\nstderr: %s", re, out, errs)
		}
	}
}

// waitMetric waits (10 s at most) until the admin listener's sample of
// series satisfies ok: toold shows what it has done (records appended,
// calls in flight) there, and nowhere else a test can read.
func (in *instance) waitMetric(t *testing.T, series string, ok func(float64) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := strconv.ParseFloat(in.gauge(t, series), 64)
		if err == nil && ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held (%s is %q)", what, series, in.gauge(t, series))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAudit waits (10 s at most) until the audit log, read with key,
// matches re, and returns it: the recorder appends in batches, off the
// call's path, and in order, so a record found means those before it are
// there too.
func (in *instance) waitAudit(t *testing.T, key string, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := send(t, "GET", in.url+"/audit?limit=100", "", bearer(key)...)
		if re.Match(a.body) {
			return string(a.body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit log never matched %s:\n%s", re, a.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAudited waits until toold has appended at least n audit records to
// its log (the recorder writes them in batches, off the call's path).
func (in *instance) waitAudited(t *testing.T, n int) {
	t.Helper()
	in.waitMetric(t, "toold_audit_records_total", func(v float64) bool { return v >= float64(n) },
		strconv.Itoa(n)+" audit records appended")
}
