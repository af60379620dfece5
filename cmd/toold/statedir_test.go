package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
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

	// The second is started as the first was (the same addresses, which
	// the README's default would give both).
	apiAddr, adminAddr := strings.TrimPrefix(first.url, "http://"), strings.TrimPrefix(first.admin, "http://")
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, []string{"-listen", apiAddr, "-admin-listen", adminAddr, "-workspace", a},
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
	// And the whole command that runs a second one beside it: its own
	// directory, and addresses free now, neither the first's nor each other.
	m := regexp.MustCompile(`toold -state-dir DIR -listen (\S+) -admin-listen (\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("stderr does not say how to run a second toold: %s", stderr.String())
	}
	if m[1] == apiAddr || m[1] == adminAddr || m[2] == apiAddr || m[2] == adminAddr || m[1] == m[2] {
		t.Errorf("suggested -listen %s -admin-listen %s beside the first's %s and %s", m[1], m[2], apiAddr, adminAddr)
	}
	for _, addr := range m[1:] {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("the suggested address %s is not free: %v", addr, err)
			continue
		}
		ln.Close()
	}
}
