package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestStateDirPerWorkspace: two checkouts served side by side each get a
// store of their own by default, and a second toold on a workspace already
// served is refused with what to do about it.
func TestStateDirPerWorkspace(t *testing.T) {
	states := t.TempDir()
	t.Setenv("XDG_STATE_HOME", states)
	a, b := workspace(t), workspace(t)
	first := startArgs(t, nil, "-workspace", a)
	second := startArgs(t, nil, "-workspace", b)
	for _, in := range []*instance{first, second} {
		if status, body := in.get("/readyz"); status != 200 {
			t.Errorf("readyz: %d %s", status, body)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(states, "toold", "*", "toold.lock"))
	if len(dirs) != 2 {
		t.Errorf("state directories: %v, want one per workspace", dirs)
	}

	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"-listen", "127.0.0.1:0", "-admin-listen", "off", "-workspace", a},
		func(string) (string, bool) { return "", false }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if err == nil {
		t.Fatal("a second toold on the same workspace's store started")
	}
	for _, say := range []string{filepath.Join(states, "toold", filepath.Base(a)), "in use by another toold (pid " + strconv.Itoa(os.Getpid()),
		"-state-dir DIR", "TOOLD_STATE_DIR=DIR", "state.dir"} {
		if !strings.Contains(stderr.String(), say) {
			t.Errorf("stderr %q does not say %q", stderr.String(), say)
		}
	}
}
