package confirm

import (
	"errors"
	"testing"
	"time"
)

func TestTokens(t *testing.T) {
	g := New([]byte("secret"), time.Minute)
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
		if err := g.Check(tt.caller, tt.tool, tt.args, tt.token); !errors.Is(err, tt.want) {
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
	if err := g.Check("a", "t", nil, tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("got %v", err)
	}
}

func TestSharedSecretAcrossReplicas(t *testing.T) {
	a, b := New([]byte("shared"), time.Minute), New([]byte("shared"), time.Minute)
	tok, _ := a.Issue("c", "t", []byte("{}"))
	if err := b.Check("c", "t", []byte("{}"), tok); err != nil {
		t.Fatal(err)
	}
	other := New(nil, time.Minute)
	tok, _ = a.Issue("c", "t", []byte("{}"))
	if err := other.Check("c", "t", []byte("{}"), tok); !errors.Is(err, ErrMismatch) {
		t.Fatalf("a token crossed secrets: %v", err)
	}
}

func FuzzCheck(f *testing.F) {
	g := New([]byte("k"), time.Minute)
	tok, _ := g.Issue("a", "t", []byte("x"))
	f.Add(tok)
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		_ = g.Check("a", "t", []byte("y"), token) // never panics; other args never match
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
		if err := g.Check("alice", "danger", args, tok); err != nil {
			t.Errorf("token %d: %v", len(tok), err)
		}
	}
	if err := g.Check("alice", "danger", args, b); !errors.Is(err, ErrUsed) {
		t.Errorf("replay: %v", err)
	}
}
