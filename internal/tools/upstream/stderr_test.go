package upstream

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/zaptest/observer"

	"github.com/toold/toold/internal/launch"
)

// Crashes as the runtimes print them: the reason is above the last line.
const (
	nodeCrash = `node:internal/modules/cjs/loader:1228
  throw err;
  ^

Error: Cannot find module '/srv/mcp/dist/index.js'
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at Module._load (node:internal/modules/cjs/loader:1051:27)
    at node:internal/main/run_main_module:28:49 {
  code: 'MODULE_NOT_FOUND',
  requireStack: []
}

Node.js v20.20.2
`
	pythonCrash = `Traceback (most recent call last):
  File "/srv/mcp/server.py", line 3, in <module>
    import mcp
ModuleNotFoundError: No module named 'mcp'
`
	goPanic = `panic: open /etc/mcp/config.json: permission denied

goroutine 1 [running]:
main.main()
	/src/main.go:12 +0x1d
exit status 2
`
)

// TestStderrReason: what a server's stderr says about why it stopped is
// the lines naming a failure and the last ones, not the last alone.
func TestStderrReason(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		want         []string
		not          []string
	}{
		{"node", nodeCrash, []string{"Error: Cannot find module '/srv/mcp/dist/index.js'", "code: 'MODULE_NOT_FOUND',", "Node.js v20.20.2"},
			[]string{"at Module._load", "throw err"}},
		{"python", pythonCrash, []string{"Traceback (most recent call last):", "ModuleNotFoundError: No module named 'mcp'"}, nil},
		{"go", goPanic, []string{"panic: open /etc/mcp/config.json: permission denied", "exit status 2"}, []string{"goroutine 1"}},
		{"one line", "listen EADDRINUSE: address already in use :::3000\n", []string{"listen EADDRINUSE: address already in use :::3000"}, nil},
		{"nothing", "\n  \n", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stderrReason(tc.stderr)
			if tc.want == nil && got != "" {
				t.Errorf("%q, want nothing", got)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("%q keeps %q, which says nothing of why", got, n)
				}
			}
		})
	}
	// Bounded: a server that logs errors in a loop gives the last lines.
	flood := strings.Repeat("error: retrying "+strings.Repeat("x", 500)+"\n", 1000) + "fatal: gave up\n"
	got := stderrReason(flood)
	if n := strings.Count(got, " | ") + 1; n != reasonLines || !strings.HasSuffix(got, "fatal: gave up") {
		t.Errorf("%d lines, ending %q", n, got[max(0, len(got)-40):])
	}
	if len(got) > reasonLines*(reasonLineSize+len("… | ")) {
		t.Errorf("%d bytes", len(got))
	}
}

// FuzzStderrReason: whatever a server writes, the reason is bounded,
// valid UTF-8 when its stderr is, and made of its lines.
func FuzzStderrReason(f *testing.F) {
	for _, s := range []string{nodeCrash, pythonCrash, goPanic, "", "é\n", strings.Repeat("é", 400)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := stderrReason(s)
		if len(got) > reasonLines*(reasonLineSize+len("… | ")) {
			t.Fatalf("%d bytes", len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("%q from valid UTF-8", got)
		}
		for _, line := range strings.Split(got, " | ") {
			if line = strings.TrimSuffix(line, "…"); !strings.Contains(s, line) {
				t.Fatalf("%q is not a line of the input", line)
			}
		}
	})
}

// TestStartFailureSaysWhy: a server that exits before it answers is
// logged with the lines of its stderr that say why, the error above its
// runtime's last line included.
func TestStartFailureSaysWhy(t *testing.T) {
	c := Config{Name: "broken", Command: "/bin/sh", Args: []string{"-c", "printf '%s' \"$CRASH\" >&2; exit 1"},
		Env: map[string]string{"CRASH": nodeCrash}, Sandbox: launch.Sandbox{Containment: "none"}, ConnectTimeout: 5 * time.Second,
		ConfirmDestructive: "none"}
	r := newRig(t, c)
	for _, why := range []string{"Error: Cannot find module '/srv/mcp/dist/index.js'", "Node.js v20.20.2"} {
		if !r.logged("MCP server unavailable", why) {
			t.Errorf("the failure to start does not say %q: %v", why, r.logs.FilterMessage("MCP server unavailable").All())
		}
	}
}

// crashSays is what the peer's crash tool writes to stderr as it dies.
const crashSays = "fatal error: the index is corrupt\n    at load (index.js:3:9)\nbye\n"

// TestCrashSaysWhy: a server that dies after it started is logged with
// the lines of its stderr that say why, though its last says nothing.
func TestCrashSaysWhy(t *testing.T) {
	r := newRig(t, peer(t, "p", "sdk"))
	if env := r.call("p.crash", `{}`); env.Error == nil {
		t.Fatal("the crash succeeded")
	}
	ended := func() []observer.LoggedEntry {
		return append(r.logs.FilterMessage("MCP server disconnected").All(), r.logs.FilterMessage("MCP server process exited").All()...)
	}
	waitFor(t, "the end logged", 10*time.Second, func() bool { return len(ended()) > 0 })
	m := ended()[0].ContextMap()
	if got, _ := m["stderr"].(string); got != "fatal error: the index is corrupt | at load (index.js:3:9) | bye" ||
		!strings.Contains(fmt.Sprint(m["error"]), "exit status 3") {
		t.Errorf("the end is logged with %v", m)
	}
}
