package limits

import (
	"errors"
	"testing"
	"time"

	"github.com/toold/toold/internal/registry"
	"github.com/toold/toold/internal/tools"
)

// TestPrincipalRate: each principal has a bucket of its own; past it a
// call is refused with when the next one fits, and the others go on.
func TestPrincipalRate(t *testing.T) {
	now := time.Unix(1000, 0)
	p := NewPrincipals(PrincipalConfig{Rate: 2, Burst: 2}, nil)
	p.now = func() time.Time { return now }
	for i := range 2 {
		if err := p.Charge("alice"); err != nil {
			t.Fatalf("call %d within the burst: %v", i, err)
		}
	}
	err := p.Charge("alice")
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != "principal_rate" || te.RetryAfter != 500*time.Millisecond {
		t.Fatalf("past the burst: %v", err)
	}
	if err := p.Charge("bob"); err != nil {
		t.Errorf("another principal is held back: %v", err)
	}
	now = now.Add(500 * time.Millisecond)
	if err := p.Charge("alice"); err != nil {
		t.Errorf("after Retry-After: %v", err)
	}
	if (*Principals)(nil).Charge("x") != nil || NewPrincipals(PrincipalConfig{}, nil) != nil {
		t.Error("no bounds configured must bound nothing")
	}
}

// TestPrincipalShare: a principal holds at most its share of a tool's
// bulkhead (at least one call); releasing gives it back; other principals
// and other tools are not counted against it.
func TestPrincipalShare(t *testing.T) {
	p := NewPrincipals(PrincipalConfig{Share: 0.5}, nil)
	sleep := &registry.Entry{Spec: tools.Spec{Name: "sleep", Limits: tools.Limits{MaxInFlight: 2, MaxQueue: 2}}}
	echo := &registry.Entry{Spec: tools.Spec{Name: "echo", Limits: tools.Limits{MaxInFlight: 1}}}
	var held []func()
	for range 2 {
		r, err := p.Hold("alice", sleep)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, r)
	}
	_, err := p.Hold("alice", sleep)
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != "principal_share" || te.RetryAfter < time.Second {
		t.Fatalf("past the share: %v", err)
	}
	if _, err := p.Hold("bob", sleep); err != nil {
		t.Errorf("another principal: %v", err)
	}
	if _, err := p.Hold("alice", echo); err != nil {
		t.Errorf("a share rounds up to one call: %v", err)
	}
	held[0]()
	held[0]() // a second release frees nothing more
	if _, err := p.Hold("alice", sleep); err != nil {
		t.Errorf("after a release: %v", err)
	}
	if _, err := p.Hold("alice", sleep); err == nil {
		t.Error("a double release freed two places")
	}
}
