package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/testpeer"
)

// TestReleaseToolsReuse (issue 45, item 10): `make release` builds
// GoReleaser only when no build of the pinned version is at hand. Its
// release-tools target runs tools/release/install.sh, which takes a binary
// whose stamped module version and checksum are tools/release/go.sum's —
// here .ci/run's cached builds, off PATH — and refuses a binary of another
// version or none (a script named goreleaser on PATH), building instead
// (RELEASE_TOOLS_NO_BUILD=1 turns that into a failure, so the test never
// builds). The pinned builds come from .ci/run (TOOLD_REQUIRE_RELEASE=1
// there); elsewhere the second half skips, saying so.
func TestReleaseToolsReuse(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(makefile), "tools/release/install.sh $(RELEASE_BIN)") {
		t.Error("the Makefile's release-tools target does not run tools/release/install.sh $(RELEASE_BIN)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs("../tools/release/install.sh")
	install := func(path, cache string) (string, error) {
		t.Helper()
		out := t.TempDir()
		cmd := exec.Command(script, out)
		cmd.Env = append(os.Environ(), "PATH="+path+string(os.PathListSeparator)+filepath.Dir(goBin)+string(os.PathListSeparator)+"/usr/bin:/bin",
			"GOBIN="+t.TempDir(), "TOOLD_CI_CACHE="+cache, "RELEASE_TOOLS_NO_BUILD=1")
		b, err := cmd.CombinedOutput()
		return string(b), err
	}

	fake := t.TempDir()
	for _, name := range []string{"goreleaser", "cyclonedx-gomod"} {
		if err := os.WriteFile(filepath.Join(fake, name), []byte("#!/bin/sh\necho v2.15.1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := install(fake, t.TempDir())
	if err == nil || !strings.Contains(out, "goreleaser v") || !strings.Contains(out, "no build of it found") {
		t.Errorf("a goreleaser that is not the pinned build was taken: %v\n%s", err, out)
	}

	cache := t.TempDir()
	for _, name := range []string{"goreleaser", "cyclonedx-gomod"} {
		bin := testpeer.Binary(t, "", name, "TOOLD_REQUIRE_RELEASE",
			name+" (the pinned build) is not on PATH: .ci/run builds it into $(go env GOPATH)/bin, or `make release-tools` into bin/release")
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cache, name+"-0123456789abcdef"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err = install(fake, cache)
	if err != nil || strings.Count(out, "reusing "+cache) != 2 {
		t.Errorf("the pinned builds in .ci/run's cache were not reused: %v\n%s", err, out)
	}
}
