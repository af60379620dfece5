package launch

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestOnlyNoneRunsHere (Windows): auto and Linux's modes refuse, naming
// the OS; an explicit none finds a program by PATHEXT and runs it, and a
// run past its timeout is stopped. Not run where this was written (no
// Windows machine): compiled by CI's GOOS=windows go vet.
func TestOnlyNoneRunsHere(t *testing.T) {
	r := onlyNone(t)
	res, err := r.Run(context.Background(), RunSpec{Argv: []string{"cmd", "/c", "echo ok %TEMP%"}})
	if err != nil || !res.OK || !strings.HasPrefix(res.Stdout, "ok ") || res.Containment != notIsolated {
		t.Fatalf("%+v, %v", res, err)
	}
	start := time.Now()
	res, err = r.Run(context.Background(), RunSpec{Argv: []string{"ping", "-n", "30", "127.0.0.1"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v, %v after %v", res, err, time.Since(start))
	}
}
