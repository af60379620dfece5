package launch_test

import (
	"testing"

	"github.com/toold/toold/internal/launch/launchtest"
)

// TestUnprivileged runs the containment tests again as uid 65534 (through
// setpriv, with this test binary), where auto means bwrap or an
// unprivileged user namespace and toold can create no cgroup.
func TestUnprivileged(t *testing.T) {
	launchtest.RunUnprivileged(t, 65534, "^(TestAutoNeverFallsBackToNone|TestDescendantsGoneWhenRunEnds|TestMinimalRoot|TestLimitsPerRun|"+
		"TestTimeoutKillsTheTree|TestSecretEnvironmentIsInvisible|TestNetworkOff|TestPrivateTempDirRemoved|TestProcessSpeaksAndStops|TestSyscallFilter|TestSocketFilter|TestProtectedPortsAreOutOfReach|"+
		"TestEgressPrograms|TestEgressSecretNowhere|TestEgressRefusals|TestEgressNoWayAround)$")
}
