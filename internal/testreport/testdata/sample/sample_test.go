package sample

import "testing"

func TestPasses(t *testing.T) {
	t.Log("a line a passing test logs")
}

func TestPeerMissing(t *testing.T) {
	t.Log("looking for the peer")
	t.Skip("SKIPPED: no OpenID Provider to test against. Build it with `(cd test/oidc && go build .)`")
}

func TestTable(t *testing.T) {
	for _, name := range []string{"one", "two", "three"} {
		t.Run(name, func(t *testing.T) {
			if name == "two" {
				t.Skip("containment none shares the host's | file system")
			}
		})
	}
}

func TestSilentSkip(t *testing.T) { t.Skip() }

func TestAlsoMissing(t *testing.T) {
	t.Skip("SKIPPED: no OpenID Provider to test against. Build it with `(cd test/oidc && go build .)`")
}

func TestFails(t *testing.T) {
	t.Log("before the failure")
	t.Error("the failure's message")
}
