package state_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/state"
	"github.com/toold/toold/internal/state/statetest"
)

func TestEmbeddedCreatesBucketsAndStreams(t *testing.T) {
	dir := t.TempDir()
	st, err := state.Open(context.Background(), state.Options{Dir: dir, Retention: time.Hour, IdempotencyTTL: 2 * time.Hour,
		EventsMaxBytes: 1 << 20, AuditMaxAge: 48 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	js := st.JetStream()
	for name, want := range map[string]func(*jetstream.StreamConfig) bool{
		"KV_" + state.ExecutionsBucket:  func(c *jetstream.StreamConfig) bool { return c.MaxAge == time.Hour },
		"KV_" + state.IdempotencyBucket: func(c *jetstream.StreamConfig) bool { return c.MaxAge == 2*time.Hour },
		state.WorkStream:                func(c *jetstream.StreamConfig) bool { return c.MaxAge == time.Hour },
		state.EventsStream:              func(c *jetstream.StreamConfig) bool { return c.MaxBytes == 1<<20 },
		state.AuditStream: func(c *jetstream.StreamConfig) bool {
			return c.MaxAge == 48*time.Hour && c.DenyDelete && c.DenyPurge
		},
	} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if c := s.CachedInfo().Config; !want(&c) {
			t.Errorf("%s: limits not applied: %+v", name, c)
		}
	}
	if err := st.Ready(); err != nil {
		t.Errorf("ready: %v", err)
	}
	if st.ClientURL() != "" {
		t.Errorf("the embedded server listens without being asked: %s", st.ClientURL())
	}
	// A client of the store can neither delete an audit record nor purge
	// the log.
	if _, err := st.Publish(ctx, "audit_append", state.AuditSubject, []byte("x")); err != nil {
		t.Fatal(err)
	}
	audit, _ := js.Stream(ctx, state.AuditStream)
	if err := audit.DeleteMsg(ctx, 1); err == nil {
		t.Error("an audit record was deleted")
	}
	if err := audit.Purge(ctx); err == nil {
		t.Error("the audit log was purged")
	}
}

// TestBucketOperations: create, conflicting create, update at a stale
// revision, get of a missing key; each maps to the package's errors.
func TestBucketOperations(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := statetest.Open(t, reg, "a")
	ctx := context.Background()
	b := st.Executions
	rev, err := b.Create(ctx, "k", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, "k", []byte("2")); !errors.Is(err, state.ErrConflict) {
		t.Errorf("second create: %v", err)
	}
	if _, err := b.Update(ctx, "k", []byte("3"), rev+10); !errors.Is(err, state.ErrConflict) {
		t.Errorf("stale update: %v", err)
	}
	if _, err := b.Update(ctx, "k", []byte("4"), rev); err != nil {
		t.Errorf("update: %v", err)
	}
	if v, _, err := b.Get(ctx, "k"); err != nil || string(v) != "4" {
		t.Errorf("get: %q %v", v, err)
	}
	if _, _, err := b.Get(ctx, "missing"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("missing: %v", err)
	}
	b.Put(ctx, "a.1", nil)
	b.Put(ctx, "a.2", nil)
	b.Put(ctx, "b.1", nil)
	keys, err := b.Keys(ctx, "a.>")
	if err != nil || len(keys) != 2 {
		t.Errorf("keys a.>: %v %v", keys, err)
	}
	if n := testutil.CollectAndCount(reg, "toold_store_operation_duration_seconds"); n == 0 {
		t.Errorf("no latency recorded")
	}
}

func TestWatchSeesChanges(t *testing.T) {
	st := statetest.Open(t, nil, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st.Executions.Put(ctx, "w", []byte("first"))
	ch, err := st.Executions.Watch(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	if e := <-ch; string(e.Value) != "first" {
		t.Fatalf("initial value %q", e.Value)
	}
	st.Executions.Put(ctx, "w", []byte("second"))
	if e := <-ch; string(e.Value) != "second" {
		t.Fatalf("update %q", e.Value)
	}
}

// TestStartupErrors: each way the store cannot start says what to fix.
func TestStartupErrors(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Log("running as root: the unwritable-directory case uses a file in the way instead of permissions")
	}
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o600)
	held := t.TempDir()
	first, err := state.Open(context.Background(), state.Options{Dir: held})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	tests := []struct {
		name string
		opts state.Options
		want string
	}{
		{"directory is a file", state.Options{Dir: filepath.Join(file, "sub")}, "cannot create state.dir"},
		{"directory in use", state.Options{Dir: held}, "in use by another toold"},
		{"unreachable url", state.Options{URL: "nats://127.0.0.1:1", ConnectTimeout: time.Second}, "cannot reach NATS at nats://127.0.0.1:1"},
		{"credentials kept out", state.Options{URL: "nats://u:hunter2@127.0.0.1:1", ConnectTimeout: time.Second}, "[credentials]@127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := state.Open(context.Background(), tt.opts)
			if err == nil {
				st.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDefaultDir(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tt := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "/x/state/toold"},
		{map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "/home/u/.local/state/toold"},
		{map[string]string{"HOME": "/home/u"}, "/home/u/.local/state/toold"},
	} {
		if got, err := state.DefaultDir(env(tt.env), ""); err != nil || got != tt.want {
			t.Errorf("%v: %q %v, want %q", tt.env, got, err, tt.want)
		}
	}
}

// TestDefaultDirPerWorkspace: two checkouts get two state directories (so
// neither locks the other out), the same checkout the same one however it
// is named, and the directory says which checkout it is for.
func TestDefaultDirPerWorkspace(t *testing.T) {
	home := map[string]string{"HOME": "/home/u"}
	env := func(k string) (string, bool) { v, ok := home[k]; return v, ok }
	root := t.TempDir()
	a, b := filepath.Join(root, "checkout-a"), filepath.Join(root, "other", "checkout b")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link-to-a")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	dir := func(ws string) string {
		t.Helper()
		d, err := state.DefaultDir(env, ws)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	da, db := dir(a), dir(b)
	if da == db {
		t.Fatalf("two workspaces share %s", da)
	}
	for _, d := range []string{da, db} {
		if filepath.Dir(d) != "/home/u/.local/state/toold" {
			t.Errorf("%s is not under the user's state directory", d)
		}
	}
	if got := filepath.Base(da); !regexp.MustCompile(`^checkout-a-[0-9a-f]{12}$`).MatchString(got) {
		t.Errorf("the directory of %s is %s", a, got)
	}
	if got := filepath.Base(db); !regexp.MustCompile(`^checkout_b-[0-9a-f]{12}$`).MatchString(got) {
		t.Errorf("the directory of %s is %s", b, got)
	}
	if dir(link) != da || dir(a+"/.") != da {
		t.Errorf("the same workspace named otherwise: %s, %s, want %s", dir(link), dir(a+"/."), da)
	}
	wd, _ := os.Getwd()
	if dir(".") != dir(wd) {
		t.Errorf("a relative workspace: %s, want %s", dir("."), dir(wd))
	}
}

// TestSecondOpenSaysWhatToDo: a second store on a directory in use is
// refused, naming the process that holds it and every way to pick another
// directory.
func TestSecondOpenSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	first, err := state.Open(context.Background(), state.Options{Dir: dir, Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := state.Open(context.Background(), state.Options{Dir: dir, Name: "second"})
	if err == nil {
		second.Close()
		t.Fatal("a second store opened on a directory in use")
	}
	var inUse *state.InUseError
	if !errors.As(err, &inUse) || inUse.Dir != dir {
		t.Fatalf("error %v (%T), want an InUseError for %s", err, err, dir)
	}
	for _, say := range []string{dir, "in use by another toold (pid " + strconv.Itoa(os.Getpid()) + ", since ",
		"-state-dir DIR", "TOOLD_STATE_DIR=DIR", "state.dir", "state.nats.url"} {
		if !strings.Contains(err.Error(), say) {
			t.Errorf("error %q does not say %q", err, say)
		}
	}
}

// TestExternalServerAndReconnect: the same code path against a real
// nats-server process; readiness follows the connection through a restart.
func TestExternalServerAndReconnect(t *testing.T) {
	ns := statetest.StartServer(t)
	st, err := state.Open(context.Background(), state.Options{URL: ns.URL, Name: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if _, err := st.Executions.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	ns.Stop()
	waitFor(t, func() bool { return st.Ready() != nil })
	if _, _, err := st.Executions.Get(ctx, "k"); !errors.Is(err, state.ErrUnavailable) {
		t.Errorf("get while down: %v", err)
	}
	ns.Start()
	waitFor(t, func() bool { return st.Ready() == nil })
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		v, _, err := st.Executions.Get(ctx, "k")
		if err == nil {
			if string(v) != "v" {
				t.Fatalf("value after restart %q", v)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("never read back after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExpectedSequenceConflict: an append that expects a last sequence
// another writer moved (the audit chain's contention) is ErrConflict, like
// a stale KV update, and neither counts as a store error.
func TestExpectedSequenceConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := statetest.Open(t, reg, "a")
	ctx := context.Background()
	if _, err := st.Publish(ctx, "append", state.AuditSubject, []byte("x"), jetstream.WithExpectLastSequence(0)); err != nil {
		t.Fatal(err)
	}
	_, err := st.Publish(ctx, "append", state.AuditSubject, []byte("y"), jetstream.WithExpectLastSequence(0))
	if !errors.Is(err, state.ErrConflict) {
		t.Errorf("append after another writer's: %v, want ErrConflict", err)
	}
	rev, _ := st.Executions.Create(ctx, "k", []byte("1"))
	if _, err := st.Executions.Update(ctx, "k", []byte("2"), rev+1); !errors.Is(err, state.ErrConflict) {
		t.Errorf("stale update: %v, want ErrConflict", err)
	}
	if n := testutil.CollectAndCount(reg, "toold_store_errors_total"); n != 0 {
		t.Errorf("contention counted as %d store error series", n)
	}
}

// TestCleanCloseIsQuiet: closing a store is no loss of its connection:
// nothing at warn level or above is logged.
func TestCleanCloseIsQuiet(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	st, err := state.Open(context.Background(), state.Options{Dir: t.TempDir(), Name: "quiet", Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the client's callbacks run on their own goroutine
	for _, e := range logs.All() {
		t.Errorf("a clean close logged %s %q %v", e.Level, e.Message, e.ContextMap())
	}
}
