// Command cursor-agent stands in for the cursor-agent CLI in examples/consult.yaml (see
// package fakecli).
package main

import (
	"os"

	"github.com/toold/toold/examples/standins/fakecli"
)

func main() { os.Exit(fakecli.Run("cursor-agent", os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
