package confirm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

var ctx = context.Background()

func TestTokens(t *testing.T) {
	g := Shared([]byte("secret"), time.Minute, newMemory())
	args := []byte(`{"command":["rm","x"]}`)
	tok, exp := g.Issue("alice", "execute_command", args)
	if exp.Before(time.Now()) {
		t.Fatal("expired at issue")
	}
	tests := []struct {
		name                string
		caller, tool, token string
		args                []byte
		want                error
	}{
		{"other caller", "bob", "execute_command", tok, args, ErrMismatch},
		{"other tool", "alice", "write_file", tok, args, ErrMismatch},
		{"other arguments", "alice", "execute_command", tok, []byte(`{"command":["rm","y"]}`), ErrMismatch},
		{"garbage", "alice", "execute_command", "not-a-token", args, ErrMalformed},
		{"tampered", "alice", "execute_command", tok[:len(tok)-2] + "AA", args, ErrMismatch},
		{"the same call", "alice", "execute_command", tok, args, nil},
		{"replayed", "alice", "execute_command", tok, args, ErrUsed},
	}
	for _, tt := range tests {
		if err := g.Check(ctx, tt.caller, tt.tool, tt.args, tt.token); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestExpiry(t *testing.T) {
	g := New(nil, 5*time.Minute)
	now := time.Now()
	g.now = func() time.Time { return now }
	tok, _ := g.Issue("a", "t", nil)
	g.now = func() time.Time { return now.Add(5*time.Minute + time.Second) }
	if err := g.Check(ctx, "a", "t", nil, tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("got %v", err)
	}
}

// TestSharedGates: gates with one secret and one ledger (replicas on one
// store) accept each other's tokens once between them; a gate with
// another secret says the token is not its own.
func TestSharedGates(t *testing.T) {
	ledger := newMemory()
	a, b := Shared([]byte("shared"), time.Minute, ledger), Shared([]byte("shared"), time.Minute, ledger)
	tok, _ := a.Issue("c", "t", []byte("{}"))
	if err := b.Check(ctx, "c", "t", []byte("{}"), tok); err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, "c", "t", []byte("{}"), tok); !errors.Is(err, ErrUsed) {
		t.Errorf("a token used on b ran again on a: %v", err)
	}
	other := Shared(nil, time.Minute, ledger)
	tok, _ = a.Issue("c", "t", []byte("{}"))
	if err := other.Check(ctx, "c", "t", []byte("{}"), tok); !errors.Is(err, ErrForeign) {
		t.Fatalf("a token crossed secrets: %v", err)
	}
}

// TestProcessGateTokensEndWithProcess: without a store, each process
// derives its own key even from a configured secret, so the token of a
// process before its restart is refused (its memory of used tokens is
// gone; so is the key that made the token).
func TestProcessGateTokensEndWithProcess(t *testing.T) {
	secret := []byte("configured-secret-0123456789abcdef")
	before, after := New(secret, time.Minute), New(secret, time.Minute)
	tok, _ := before.Issue("c", "t", nil)
	if err := before.Check(ctx, "c", "t", nil, tok); err != nil {
		t.Fatal(err)
	}
	err := after.Check(ctx, "c", "t", nil, tok)
	if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "restarted") {
		t.Errorf("a token of the previous process: %v", err)
	}
}

// failing is a ledger whose store is down.
type failing struct{}

func (failing) Spend(context.Context, string, time.Time, string) error {
	return errors.New("nats: connection closed to 10.0.0.7:4222")
}

// TestUnrecordedUse: a use the ledger cannot record is refused, with a
// message for the caller that does not carry the store's error.
func TestUnrecordedUse(t *testing.T) {
	g := Shared([]byte("s"), time.Minute, failing{})
	tok, _ := g.Issue("c", "t", nil)
	err := g.Check(ctx, "c", "t", nil, tok)
	if !errors.Is(err, ErrUnrecorded) || strings.Contains(err.Error(), "10.0.0.7") {
		t.Errorf("got %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	g := Shared([]byte("k"), time.Minute, newMemory())
	tok, _ := g.Issue("a", "t", []byte("x"))
	f.Add(tok)
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		if g.Check(ctx, "a", "t", []byte("y"), token) == nil {
			t.Fatalf("a token for other arguments passed: %q", token)
		}
	})
}

// TestTwoChallengesInOneSecond: a second challenge for the same call, in
// the same second, gets a token of its own; using the first does not spend
// it (it once did: the tokens were equal, and the second was "used").
func TestTwoChallengesInOneSecond(t *testing.T) {
	g := New([]byte("secret"), time.Minute)
	now := time.Now()
	g.now = func() time.Time { return now }
	args := []byte(`{"what":"x"}`)
	a, _ := g.Issue("alice", "danger", args)
	b, _ := g.Issue("alice", "danger", args)
	if a == b {
		t.Fatal("two challenges got the same token")
	}
	for _, tok := range []string{a, b} {
		if err := g.Check(ctx, "alice", "danger", args, tok); err != nil {
			t.Errorf("token %d: %v", len(tok), err)
		}
	}
	if err := g.Check(ctx, "alice", "danger", args, b); !errors.Is(err, ErrUsed) {
		t.Errorf("replay: %v", err)
	}
}

// TestCheckForTheSameExecution: without a store the same rule holds: a
// token spent by an execution passes for that execution's next run only.
func TestCheckForTheSameExecution(t *testing.T) {
	ctx := context.Background()
	g := New([]byte("secret"), time.Minute)
	tok, _ := g.Issue("c", "t", nil)
	if err := g.CheckFor(ctx, "c", "t", nil, tok, "exec-1"); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckFor(ctx, "c", "t", nil, tok, "exec-1"); err != nil {
		t.Errorf("the same execution again: %v", err)
	}
	if err := g.CheckFor(ctx, "c", "t", nil, tok, "exec-2"); !errors.Is(err, ErrUsed) {
		t.Errorf("another execution: %v", err)
	}
	if err := g.Check(ctx, "c", "t", nil, tok); !errors.Is(err, ErrUsed) {
		t.Errorf("a plain call: %v", err)
	}
}
