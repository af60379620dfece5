package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toold/toold/internal/dispatch"
	"github.com/toold/toold/internal/events"
	"github.com/toold/toold/internal/limits"
	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
	"github.com/toold/toold/internal/tools/diag"
)

// replica is a dispatcher whose recorder writes to st.
type replica struct {
	disp *dispatch.Dispatcher
	rec  *events.Recorder
	reg  *prometheus.Registry
}

// testSigner is the audit key of the test replicas; trusted verifies
// with its public key.
var (
	testSigner = events.GenerateSigner()
	trusted    = events.VerifyOptions{Keys: events.NewKeyring(testSigner.PublicKey())}
)

func newReplica(t *testing.T, st *state.Store) *replica {
	t.Helper()
	return newReplicaFlushing(t, st, 5*time.Millisecond)
}

// newReplicaFlushing is newReplica whose recorder flushes every interval
// (and on Close): a test that needs its calls in one flush gives an
// interval no test outlasts, since on a busy machine a 5 ms ticker can
// fall between a call's start and its end.
func newReplicaFlushing(t *testing.T, st *state.Store, interval time.Duration) *replica {
	t.Helper()
	reg, err := registry.New(registry.Options{}, diag.Echo())
	if err != nil {
		t.Fatal(err)
	}
	san, _ := sanitize.New(sanitize.Config{}, nil)
	metrics := prometheus.NewRegistry()
	rec := events.NewRecorder(events.Options{Store: st, Audit: true, Signer: testSigner, FlushInterval: interval, Registerer: metrics})
	go rec.Run()
	d, err := dispatch.New(dispatch.Options{Registry: registry.NewLive(reg, registry.Options{}), Sanitizer: san, Limiter: limits.New(limits.Options{}),
		Observers: []dispatch.Observer{rec}})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{disp: d, rec: rec, reg: metrics}
}

func (r *replica) call(caller, body string) *dispatch.Envelope {
	return r.disp.Execute(context.Background(), &dispatch.Request{Tool: "echo", Body: []byte(body), Caller: caller, RequestID: "req-" + caller})
}

// TestActivityAndAudit: every call leaves an end event — one that started
// within the same flush has no start event of its own, its end says when
// it started (coalesced) — and one audit record; the records of one flush
// are one block, sealed on its last record; arguments appear only as a
// hash of their canonical form.
func TestActivityAndAudit(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	// One flush, at Close: the coalescing below is what a flush does to
	// the calls inside it.
	r := newReplicaFlushing(t, st, time.Hour)
	r.call("alice", `{"message":"secret-ish value","data":{"b":1,"a":2}}`)
	r.call("bob", `{"data":{"a":2,"b":1},"message":"secret-ish value"}`)
	r.call("bob", `{"message":42}`)
	r.rec.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []string
	events.Activity(ctx, st, events.Position{FromStart: true}, events.Filter{}, func(ev events.Event) bool {
		got = append(got, fmt.Sprint(ev.Type, " ", ev.Caller, " ", ev.Status, " ", ev.Coalesced && !ev.Started.IsZero() && !ev.Started.After(ev.Time)))
		return len(got) < 3
	})
	// The refused call never started.
	want := []string{"end alice success true", "end bob success true", "error bob rejected false"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("activity:\n got %q\nwant %q", got, want)
	}
	var export bytes.Buffer
	n, err := events.Export(ctx, st, &export)
	if err != nil || n != 3 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	if strings.Contains(export.String(), "secret-ish") {
		t.Errorf("arguments leaked into the audit log:\n%s", export.String())
	}
	var recs []events.Record
	for _, line := range strings.Split(strings.TrimSpace(export.String()), "\n") {
		var rec events.Record
		json.Unmarshal([]byte(line), &rec)
		recs = append(recs, rec)
	}
	if recs[0].ArgsSHA256 != recs[1].ArgsSHA256 || recs[0].ArgsSHA256 == recs[2].ArgsSHA256 {
		t.Errorf("argument hashes do not follow canonical arguments: %s %s %s", recs[0].ArgsSHA256, recs[1].ArgsSHA256, recs[2].ArgsSHA256)
	}
	if recs[0].Caller != "alice" || recs[2].Status != "rejected" || recs[2].ErrorType != "validation_error" ||
		recs[0].Hash != "" || recs[1].Hash != "" || recs[2].Hash == "" || recs[2].SignedFrom != 1 {
		t.Errorf("records: %+v", recs)
	}
	v, err := events.Verify(ctx, st, trusted)
	if err != nil || !v.OK() || v.Records != 3 || v.First != 1 || v.Last != 3 || v.Head != recs[2].Hash {
		t.Errorf("verify: %+v %v", v, err)
	}
	metrics := gather(t, r.reg)
	for _, want := range []string{"toold_audit_records_total 3\n", "toold_events_published_total 3\n", "toold_events_pending 0\n"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// TestAdminRecord: an administrative action is an audit record of its
// own kind, with its action and target, and no event.
func TestAdminRecord(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st)
	r.rec.Admin("ops", "approve", "exec-1", "req-1")
	r.rec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var export bytes.Buffer
	if n, err := events.Export(ctx, st, &export); err != nil || n != 1 {
		t.Fatalf("export: %d records, %v", n, err)
	}
	var rec events.Record
	if err := json.Unmarshal(export.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != "admin" || rec.Caller != "ops" || rec.Action != "approve" || rec.Target != "exec-1" || rec.RequestID != "req-1" ||
		rec.Status != "" || rec.ArgsSHA256 != "" {
		t.Errorf("record: %+v", rec)
	}
	if metrics := gather(t, r.reg); !strings.Contains(metrics, "toold_events_published_total 0\n") {
		t.Errorf("an administrative action made an event:\n%s", metrics)
	}
}

// TestTamperingIsFound: a record removed from the store, a record altered
// in an export, and a line removed from an export are each found.
func TestTamperingIsFound(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	r := newReplica(t, st)
	for i := range 6 {
		r.call(fmt.Sprintf("k%d", i), `{"message":"x"}`)
		r.rec.Close() // one message per call, so one can be removed alone
		r = newReplica(t, st)
	}
	r.rec.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var export bytes.Buffer
	if _, err := events.Export(ctx, st, &export); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSpace(export.String()), "\n")
	tests := []struct {
		name, file, want string
	}{
		{"intact", export.String(), ""},
		{"altered", strings.Replace(export.String(), `"caller":"k3"`, `"caller":"k9"`, 1), "altered"},
		{"removed", strings.Join(append(append([]string{}, lines[:2]...), lines[3:]...), ""), "1 record(s) removed"},
		{"swapped", lines[0] + lines[2] + lines[1] + strings.Join(lines[3:], ""), "removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := events.VerifyFile(strings.NewReader(tt.file), trusted)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" && !v.OK() || tt.want != "" && !strings.Contains(strings.Join(v.Problems, "\n"), tt.want) {
				t.Errorf("problems %q, want %q", v.Problems, tt.want)
			}
		})
	}
	// The stream refuses to delete a message: a client of the store
	// makes the stream anew without it.
	rewriteAudit(t, st, func(lines [][]byte) [][]byte { return append(lines[:2:2], lines[3:]...) })
	v, err := events.Verify(ctx, st, trusted)
	if err != nil || v.OK() || !strings.Contains(strings.Join(v.Problems, "\n"), "record 4 follows record 2") {
		t.Errorf("a record removed from the store: %+v %v", v, err)
	}
}

// TestOneChainAcrossReplicas: two recorders writing at once to one store
// make one chain.
func TestOneChainAcrossReplicas(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	a, b := newReplica(t, st), newReplica(t, st)
	var wg sync.WaitGroup
	for _, r := range []*replica{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				r.call("k", `{"message":"x"}`)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	a.rec.Close()
	b.rec.Close()
	v, err := events.Verify(context.Background(), st, trusted)
	if err != nil || !v.OK() || v.Records != 100 {
		t.Errorf("verify: %+v %v", v, err)
	}
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	var b strings.Builder
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			fmt.Fprintf(&b, "%s %g\n", mf.GetName(), v)
		}
	}
	return b.String()
}

func TestFilter(t *testing.T) {
	ev := &events.Event{Type: "error", Tool: "echo", Caller: "k", Status: "rejected"}
	for _, tt := range []struct {
		f    events.Filter
		want bool
	}{
		{events.Filter{}, true}, {events.Filter{Tool: "echo"}, true}, {events.Filter{Tool: "grep"}, false},
		{events.Filter{Caller: "k", Status: "rejected"}, true}, {events.Filter{Status: "error"}, true}, {events.Filter{Status: "success"}, false},
	} {
		if got := tt.f.Match(ev); got != tt.want {
			t.Errorf("%+v: %v", tt.f, got)
		}
	}
}

func TestParseID(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want events.ID
		ok   bool
	}{
		{"", events.ID{}, true}, {"12", events.ID{Seq: 12}, true}, {"12.3", events.ID{Seq: 12, Line: 3}, true},
		{"0", events.ID{}, false}, {"012", events.ID{}, false}, {"+1", events.ID{}, false}, {"1.-1", events.ID{}, false}, {"1.-0", events.ID{}, false}, {"1.+0", events.ID{}, false},
		{"1.01", events.ID{}, false}, {"1.4096", events.ID{}, false}, {"a", events.ID{}, false}, {"1.2.3", events.ID{}, false},
		{strings.Repeat("9", 40), events.ID{}, false}, {"18446744073709551616", events.ID{}, false},
	} {
		got, err := events.ParseID(tt.in)
		if (err == nil) != tt.ok || tt.ok && got != tt.want {
			t.Errorf("ParseID(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"", "1", "12.3", "0.0", "1.4095", "x", "18446744073709551615.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := events.ParseID(s)
		if err != nil {
			return
		}
		if s != "" && id.String() != s && id.String() != s+".0" {
			t.Errorf("%q parsed as %v", s, id)
		}
		back, err := events.ParseID(id.String())
		if s != "" && (err != nil || back != id) {
			t.Errorf("%q -> %v -> %v %v", s, id, back, err)
		}
	})
}

func FuzzVerifyFile(f *testing.F) {
	f.Add([]byte(`{"seq":1,"prev":"","hash":"00"}` + "\n"))
	f.Add([]byte("not json\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := events.VerifyFile(bytes.NewReader(data), events.VerifyOptions{})
		if err == nil && v.OK() && v.Records > 0 && v.Head == "" {
			t.Errorf("an intact chain without a head: %+v", v)
		}
		if err == nil && v.Records == 0 && !v.OK() {
			t.Errorf("problems without records: %+v", v)
		}
	})
}
