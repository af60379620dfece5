package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeFilesAreCodeForAMakeTool: issue 24, finding 3. A make tool that
// said executes: [Makefile, "*.mk"] left GNUmakefile, which make prefers,
// and makefile writable by write_file: written, then run. Every file make
// reads by itself is protected now, for a declared make tool and for
// execute_command allowing make.
func TestMakeFilesAreCodeForAMakeTool(t *testing.T) {
	for _, c := range []struct{ name, tools, by string }{
		{"declared", "  tools:\n    - {name: build, description: make, argv: [make], executes: [Makefile, \"*.mk\"], sandbox: {containment: none}}\n", "build"},
		{"execute_command", "  execute_command: {enabled: true, programs: {make: {}}, sandbox: {containment: none}}\n", "execute_command"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			cfg := filepath.Join(t.TempDir(), "toold.yaml")
			if err := os.WriteFile(cfg, []byte("tools:\n  write_file: {enabled: true}\ncommands:\n"+c.tools), 0o644); err != nil {
				t.Fatal(err)
			}
			in := start(t, nil, "-config", cfg, "-workspace", ws)
			for _, name := range []string{"GNUmakefile", "makefile", "sub/BSDmakefile", "rules.mak"} {
				body, _ := json.Marshal(map[string]any{"path": name, "content": "all:\n\ttouch /tmp/pwned\n"})
				code, env := in.exec("write_file", string(body))
				e, _ := env["error"].(map[string]any)
				if code != 403 || e["code"] != "protected_path" || !strings.Contains(e["message"].(string), c.by) {
					t.Errorf("write_file %s: %d %v", name, code, env)
				}
				if _, err := os.Stat(filepath.Join(ws, name)); err == nil {
					t.Errorf("%s was written", name)
				}
			}
		})
	}
}
