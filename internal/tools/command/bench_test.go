package command

import (
	"context"
	"os/exec"
	"testing"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/tools"
)

// BenchmarkTrue compares /bin/true run as a command tool, through its
// Execute, with a bare os/exec run of the same binary, per containment
// mode. The ratios are in README.md.
func BenchmarkTrue(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true binary")
	}
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command(truePath).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, m := range modes {
		b.Run(string(m), func(b *testing.B) {
			// No process-count limit: this VM's init reaps the zombie bwrap
			// leaves behind (see README) too slowly for thousands of runs.
			s, _ := newSet(b, m, Config{Tools: []ToolConfig{argvTool("true", truePath)}, Config: launch.Config{Rlimits: launch.Rlimits{Processes: -1}}})
			tl := tool(b, s, "true")
			call := tools.NewCall([]byte(`{}`), "bench", "bench", nil)
			for b.Loop() {
				out, err := tl.Execute(context.Background(), call)
				if err != nil || !out.(*Result).OK {
					b.Fatal(out, err)
				}
			}
		})
	}
}
