package consult

import (
	"os"
	"testing"

	"github.com/toold/toold/internal/launch"
)

// TestMain runs the sandbox shim when this test binary is one (containment
// namespaces without root re-runs it to contain a command), as toold's
// main does.
func TestMain(m *testing.M) {
	launch.Shim()
	os.Exit(m.Run())
}
