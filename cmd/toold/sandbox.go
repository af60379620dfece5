package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/toold/toold/internal/launch"
	"github.com/toold/toold/internal/launch/selftest"
)

const sandboxUsage = `usage: toold sandbox selftest [-mode MODE]… [-json]

Starts each containment mode toold provides on this machine and tries, in
each, what an attacker's program would (writes outside the workspace, .git,
toold's port on every address, unix sockets, the network, outliving the
call, another run's environment); prints a table of what held. It exits 1
when a mode that isolates let an attack through: attach its output to a
report (docs/security.md).`

// runSandbox is `toold sandbox selftest`, and `toold sandbox probe`, the
// attacks the selftest runs inside each sandbox (not for people).
func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "probe" {
		return exitCode(selftest.Probe(args[1:], stdout))
	}
	if len(args) == 0 || args[0] != "selftest" {
		fmt.Fprintln(stderr, sandboxUsage)
		return exitCode(2)
	}
	fs := flag.NewFlagSet("toold sandbox selftest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var modes listFlag
	fs.Var(&modes, "mode", "try only this containment `mode` (repeatable; default: every mode of this OS)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := fs.Parse(args[1:]); err != nil {
		return exitCode(2)
	}
	o := selftest.Options{}
	for _, m := range modes {
		o.Modes = append(o.Modes, launch.Mode(m))
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Exe = exe
	r, err := selftest.Run(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else {
		_, _ = io.WriteString(stdout, r.Table())
	}
	if r.Failed() {
		return exitCode(1)
	}
	return nil
}
