package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStdioRefusesRootOrHomeWorkspace: an agent host launches `toold
// -stdio` from / or from $HOME without -workspace. The default workspace,
// the current directory, would hand every file there to the model; toold
// refuses to start and says to pass -workspace. Given explicitly, the
// same directory is served.
func TestStdioRefusesRootOrHomeWorkspace(t *testing.T) {
	parent := t.TempDir()
	home := filepath.Join(parent, "you")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(home, "project")
	if err := os.Mkdir(project, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := home + "/toold.yaml"
	if err := os.WriteFile(cfg, []byte("workspace: .\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		cwd     string
		args    []string
		env     map[string]string
		refused string // what stderr says, "" when toold serves
	}{
		{"cwd is /", "/", nil, map[string]string{"HOME": home}, "the root of the file system"},
		{"cwd is $HOME", home, nil, map[string]string{"HOME": home}, "your home directory"},
		{"workspace: . in a config is still the cwd", home, []string{"-config", cfg}, map[string]string{"HOME": home}, "your home directory"},
		{"cwd holds $HOME", parent, nil, map[string]string{"HOME": home}, "which holds your home directory"},
		{"-workspace given", home, []string{"-workspace", home}, map[string]string{"HOME": home}, ""},
		{"TOOLD_WORKSPACE given", "/", nil, map[string]string{"HOME": home, "TOOLD_WORKSPACE": "/"}, ""},
		{"a project elsewhere", t.TempDir(), nil, map[string]string{"HOME": home}, ""},
		{"a project under $HOME", project, nil, map[string]string{"HOME": home}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Chdir(c.cwd)
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// stdin at EOF: a served toold ends as soon as it starts.
			err := run(ctx, append([]string{"-stdio"}, c.args...), lookup, strings.NewReader(""), &stdout, &stderr)
			if c.refused == "" {
				if err != nil || !strings.Contains(stderr.String(), "serving MCP on stdio") {
					t.Fatalf("not served: %v\n%s", err, stderr.String())
				}
				return
			}
			var code exitCode
			if !errors.As(err, &code) || code != 2 {
				t.Errorf("exit: %v, want exit code 2", err)
			}
			for _, want := range []string{"-workspace", c.refused} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
				}
			}
			if strings.Contains(stderr.String(), "serving MCP") || stdout.Len() > 0 {
				t.Errorf("served anyway: stdout %q stderr %s", stdout.String(), stderr.String())
			}
		})
	}
}
