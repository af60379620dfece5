package mcpserver

import (
	"strings"
	"testing"

	"github.com/toold/toold/internal/dispatch"
)

func TestParseArtifactURI(t *testing.T) {
	id := "art_" + strings.Repeat("0a", 16)
	for _, c := range []struct {
		uri     string
		off, n  int64
		part    bool
		problem string
	}{
		{uri: ArtifactScheme + id, n: MaxArtifactRead},
		{uri: ArtifactScheme + id + "?offset=10&length=20", off: 10, n: 20, part: true},
		{uri: ArtifactScheme + id + "?offset=5", off: 5, n: MaxArtifactRead, part: true},
		{uri: "toold://executions/" + id, problem: "not an artifact"},
		{uri: ArtifactScheme + "art_xyz", problem: "32 hex digits"},
		{uri: ArtifactScheme + strings.ToUpper(id), problem: "32 hex digits"},
		{uri: ArtifactScheme + id + "/../x", problem: "32 hex digits"},
		{uri: ArtifactScheme + id + "?length=0", problem: "length must be"},
		{uri: ArtifactScheme + id + "?length=99999999999", problem: "length must be"},
		{uri: ArtifactScheme + id + "?offset=-1", problem: "offset must be"},
		{uri: ArtifactScheme + id + "?offset=1&offset=2", problem: "offset must be"},
		{uri: ArtifactScheme + id + "?offset=%zz", problem: "query"},
		{uri: ArtifactScheme + id + "?page=1", problem: "unknown parameter"},
	} {
		gotID, off, n, part, err := parseArtifactURI(c.uri)
		switch {
		case c.problem != "":
			if err == nil || !strings.Contains(err.Error(), c.problem) {
				t.Errorf("%s: %v, want %q", c.uri, err, c.problem)
			}
		case err != nil || gotID != id || off != c.off || n != c.n || part != c.part:
			t.Errorf("%s: %s %d %d %v %v", c.uri, gotID, off, n, part, err)
		}
	}
}

// FuzzArtifactURI: any URI a client sends is refused or names a valid id
// with a read that stays within MaxArtifactRead.
func FuzzArtifactURI(f *testing.F) {
	for _, s := range []string{ArtifactScheme + "art_" + strings.Repeat("f", 32), ArtifactScheme + "art_" + strings.Repeat("1", 32) + "?offset=3&length=4",
		"toold://artifacts/", "toold://artifacts/art_?length=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		id, off, n, _, err := parseArtifactURI(uri)
		if err != nil {
			return
		}
		if !dispatch.ValidArtifactID(id) || off < 0 || n <= 0 || n > MaxArtifactRead {
			t.Fatalf("%q: %q %d %d", uri, id, off, n)
		}
	})
}
