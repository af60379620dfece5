package launch

import (
	"os"
	"testing"
)

// TestMain runs the sandbox shim when this test binary is one (containment
// namespaces without root re-runs it to contain a command), as toold's
// main does.
func TestMain(m *testing.M) {
	Shim()
	os.Exit(m.Run())
}
