package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeNamesEveryPeer: the README's Tests section names every
// optional peer of the tests — each directory under test/ and the
// programs the skip helpers look for — says how many tests skip on a
// plain machine, and how to count them.
func TestReadmeNamesEveryPeer(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Tests\n")
	if !ok {
		t.Fatal("README.md has no Tests section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	dirs, err := filepath.Glob("../test/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no test peers under test/: %v", err)
	}
	var want []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			want = append(want, "test/"+filepath.Base(d))
		}
	}
	want = append(want, "bubblewrap", "Chromium", "Jaeger", "Node.js")
	for _, peer := range want {
		if !strings.Contains(section, peer) {
			t.Errorf("README's Tests section does not name the peer %s", peer)
		}
	}
	if !regexp.MustCompile(`\*\*\d+\s+tests skip\*\*`).MatchString(section) {
		t.Error("README's Tests section does not say how many tests skip on a plain machine")
	}
	if !strings.Contains(section, "grep -c -- '--- SKIP'") {
		t.Error("README's Tests section does not say how to count the skips")
	}
}
