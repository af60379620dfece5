package command

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/toold/toold/internal/testpeer"
)

// TestParseGitIndex: the gitlinks of indexes git itself wrote, in every
// version (2, 3 with an extended flag, 4 with compressed paths), with
// SHA-256 object names, and split (the gitlinks in the shared index).
func TestParseGitIndex(t *testing.T) {
	needGit(t)
	cases := []struct {
		name  string
		init  []string
		after [][]string
	}{
		{"v2", nil, nil},
		{"v3", nil, [][]string{{"add", "-N", "later.txt"}}},
		{"v4", nil, [][]string{{"update-index", "--index-version", "4"}}},
		{"sha256", []string{"--object-format=sha256"}, nil},
		{"split", nil, [][]string{{"update-index", "--split-index"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			git := func(dir string, args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"}, args...)...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			git(ws, append([]string{"init", "-q"}, c.init...)...)
			for _, d := range []string{"a/deep/er/sub", "b", "lib/inner"} {
				sub := filepath.Join(ws, d)
				if err := os.MkdirAll(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				git(sub, append([]string{"init", "-q"}, c.init...)...)
				git(sub, "commit", "-q", "--allow-empty", "-m", "x")
			}
			for _, f := range []string{"a/deep/file.txt", "a/deep/er/x.txt", "z.txt", "later.txt"} {
				if err := os.WriteFile(filepath.Join(ws, f), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			git(ws, "add", "a/deep/file.txt", "a/deep/er/x.txt", "a/deep/er/sub", "b", "lib/inner", "z.txt")
			for _, a := range c.after {
				git(ws, a...)
			}
			sc := &gitConfigScan{}
			hashLen := 20
			if c.name == "sha256" {
				hashLen = 32
			}
			got, err := sc.gitlinks(filepath.Join(ws, ".git"), hashLen)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			got = slices.Compact(got)
			if want := []string{"a/deep/er/sub", "b", "lib/inner"}; !slices.Equal(got, want) {
				t.Errorf("gitlinks %q, want %q", got, want)
			}
		})
	}
}

// FuzzGitIndex: an index is untrusted input (a command may write one);
// the parse never panics, and what it finds is a subset of what it was
// given.
func FuzzGitIndex(f *testing.F) {
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x00"), 20)
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"+string(make([]byte, 62))+"\x05\x00"), 20)
	f.Add([]byte("DIRC\x00\x00\x00\x03\x00\x00\x00\x01"+string(make([]byte, 24))+"\x00\x00\xe0\x00"+string(make([]byte, 34))+"\x40\x00\x00\x00a\x00"), 20)
	f.Fuzz(func(t *testing.T, b []byte, hashLen int) {
		if hashLen != 20 && hashLen != 32 {
			hashLen = 20
		}
		ix, err := parseGitIndex(b, hashLen)
		if err != nil {
			return
		}
		if len(ix.gitlinks) > len(b) {
			t.Errorf("%d gitlinks from %d bytes", len(ix.gitlinks), len(b))
		}
	})
}

// needGit skips a test that runs git where git is missing, saying how to
// install it; TOOLD_REQUIRE_GIT=1 (CI) fails it instead.
func needGit(t testing.TB) {
	t.Helper()
	testpeer.Git(t)
}
