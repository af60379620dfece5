package launch

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestOnlyNoneRunsHere (macOS): auto and Linux's modes refuse, naming the
// OS; an explicit none runs the program in its own process group, and a
// run past its timeout is stopped, its group with it. Not run where this
// was written (no Mac): compiled by CI's GOOS=darwin go vet.
func TestOnlyNoneRunsHere(t *testing.T) {
	r := onlyNone(t)
	res, err := r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", `echo "ok $TMPDIR"`}})
	if err != nil || !res.OK || !strings.HasPrefix(res.Stdout, "ok /") || res.Containment != notIsolated {
		t.Fatalf("%+v, %v", res, err)
	}
	start := time.Now()
	res, err = r.Run(context.Background(), RunSpec{Argv: []string{"sh", "-c", "sleep 30 & sleep 30"}, Timeout: 200 * time.Millisecond})
	if err != nil || !res.TimedOut || time.Since(start) > 5*time.Second {
		t.Fatalf("%+v, %v after %v", res, err, time.Since(start))
	}
	if res.Limits["descendants"] != groupOnly || !strings.Contains(res.Limits["cpu_time"], "no rlimits on darwin") {
		t.Errorf("limits %v", res.Limits)
	}
}
