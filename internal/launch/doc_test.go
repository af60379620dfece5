package launch

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocsNameFilesThatExist: issue 38, finding 9. The package doc said
// macOS and Windows run unsandboxed and sent readers to shim.go,
// cgroup.go and launcher.go, files that had become shim_linux.go,
// cgroup_linux.go and launcher_linux.go. Every Go file the package doc
// and the README name must exist.
func TestDocsNameFilesThatExist(t *testing.T) {
	// A name with a directory is the repository's path to it.
	named := regexp.MustCompile(`\b(?:[a-z0-9_]+/)*[a-z0-9_]+\.go\b`)
	for _, doc := range []string{"doc.go", "README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range named.FindAllString(string(b), -1) {
			path := f
			if strings.Contains(f, "/") {
				path = filepath.Join("..", "..", f)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s names %s: %v", doc, f, err)
			}
		}
	}
}
