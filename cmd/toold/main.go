// Command toold serves tools to LLM agents over HTTP: discovery with JSON
// Schemas, and execution through one pipeline of validation, sanitization,
// per-tool bulkheads and deadlines. `go run ./cmd/toold` starts it on
// 127.0.0.1:8080 with the built-in configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toold/toold/internal/launch"
)

func main() {
	// First the sandbox shim: when this process is one (toold re-run in a
	// user namespace to contain a command), it execs the command and never
	// returns. Then toold's own hardening, before anything reads the
	// environment or the configuration.
	launch.Shim()
	// A selftest probe plays a program toold runs (an attacker's, or an
	// MCP server holding a key), not toold: it keeps what such a program
	// has, its environment readable and itself dumpable.
	if len(os.Args) < 3 || os.Args[1] != "sandbox" || os.Args[2] != "probe" {
		harden()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The audit key leaves the environment before anything else runs.
	lookupEnv := withdrawEnv(os.LookupEnv, os.Unsetenv, auditKeyEnv, credentialsKeyEnv)
	gcTuned = tuneGC(lookupEnv, "/")
	err := run(ctx, os.Args[1:], lookupEnv, os.Stdin, os.Stdout, os.Stderr)
	var ec exitCode
	switch {
	case errors.As(err, &ec):
		os.Exit(int(ec))
	case err != nil:
		fmt.Fprintln(os.Stderr, "toold:", err)
		os.Exit(1)
	}
}

// exitCode ends the process with a status and no further message (the
// message was already printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
