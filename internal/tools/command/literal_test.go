package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/launch/launchtest"
)

// Argv templates render into arguments, never into a shell: in every
// containment mode a payload reaches the program as one literal argument.

// The canary writes its argv, NUL-separated, to a file; a fake id on its
// PATH leaves a file behind if anything ever runs it.
const canary = "#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done > \"$CANARY_OUT\"\n"
const fakeID = "#!/bin/sh\ntouch \"$CANARY_DIR/id-ran\"\n"

func TestShellMetacharactersStayLiteral(t *testing.T) {
	payloads := []string{"; id", "$(id)", "`id`", "| id", "&& id", "a\nid", "'; id; '", "$(touch pwned)", "x > pwned", "*"}
	for _, m := range modes {
		t.Run(string(m), func(t *testing.T) {
			tc := ToolConfig{Name: "canary", Description: "canary",
				Parameters: map[string]any{"type": "object", "properties": map[string]any{
					"arg": map[string]any{"type": "string"}, "list": map[string]any{"type": "array"}}},
				Argv: []Arg{{Arg: "set by prep"}, {Arg: "{{.arg}}"}, {Splice: "list"}}}
			tc.WorkspaceWritable = true
			s, ws := newSet(t, m, Config{Tools: []ToolConfig{tc}}, func(ws string, cfg *Config) {
				bin := filepath.Join(ws, "bin")
				writeScript(t, filepath.Join(bin, "canary"), canary)
				writeScript(t, filepath.Join(bin, "id"), fakeID)
				c := &cfg.Tools[0]
				c.Argv[0].Arg = filepath.Join(bin, "canary")
				c.Env = map[string]string{"CANARY_OUT": filepath.Join(ws, "argv"), "CANARY_DIR": ws, "PATH": bin + ":/usr/bin:/bin"}
			})
			for _, p := range payloads {
				out := filepath.Join(ws, "argv")
				_ = os.Remove(out)
				r, err := call(t, tool(t, s, "canary"), map[string]any{"arg": p, "list": []any{p, p + "2"}}, 10*time.Second)
				if err != nil {
					t.Fatalf("%q: %v", p, err)
				}
				got, err := os.ReadFile(out)
				if err != nil || !r.OK {
					t.Fatalf("%q: the canary did not run: %v %+v", p, err, r)
				}
				if diff := cmp.Diff([]string{p, p, p + "2"}, strings.Split(strings.TrimSuffix(string(got), "\x00"), "\x00")); diff != "" {
					t.Errorf("%q: argv (-want +got):\n%s", p, diff)
				}
			}
			entries, _ := os.ReadDir(ws)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if diff := cmp.Diff([]string{"argv", "bin"}, names); diff != "" {
				t.Errorf("workspace files (-want +got): %s", diff)
			}
		})
	}
}

func writeScript(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestUnprivileged runs the tests of every mode again as a non-root uid
// (not launch's 65534: go test runs both at once), where auto means bwrap
// or an unprivileged user namespace.
func TestUnprivileged(t *testing.T) {
	launchtest.RunUnprivileged(t, 65533, "^(TestShellMetacharactersStayLiteral)$")
}
