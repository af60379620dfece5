package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/tools"
)

// TestWritesThatBecomeCodeAreRefused: write_file and edit_file refuse the
// files another tool executes: .git in every spelling a file system may
// resolve to it, through symlinks too, and the globs declared tools list
// in executes. Files that only look alike are written as usual.
func TestWritesThatBecomeCodeAreRefused(t *testing.T) {
	tw := newTestWS(t, Options{Protected: []Protected{{Pattern: "Makefile", By: "make_check"},
		{Pattern: "web/.npmrc", By: "npm_test"}, {Pattern: "scripts/**/*.sh", By: "run_script"}}})
	tw.write(t, map[string]string{".git/config": "[core]\n", "sub/.git": "gitdir: ../x\n", "Makefile": "all:\n",
		"ok/notes.md": "x"})
	for _, l := range [][2]string{{".git", "gitlink"}, {"sub", "sublink"}, {".git/hooks", "hooks"}} {
		mustOK(t, os.Symlink(l[0], filepath.Join(tw.dir, l[1])))
	}
	refused := []struct{ path, by string }{
		{".git/config", "git"},
		{".git/hooks/pre-commit", "git"},
		{".git/info/attributes", "git"},
		{".git", "git"},                 // a worktree's .git file names its git directory
		{"sub/.git", "git"},             // at any depth
		{"vendor/x/.git/config", "git"}, // a nested repository
		{".GIT/config", "git"},          // case-insensitive file systems
		{".Git/HEAD", "git"},
		{".git./config", "git"},      // NTFS drops trailing dots
		{".git /config", "git"},      // and spaces
		{"git~1/config", "git"},      // NTFS short name
		{".g\u200cit/config", "git"}, // HFS+ ignores U+200C
		{"\ufeff.git/config", "git"}, // and U+FEFF
		{".git::$INDEX_ALLOCATION/config", "git"},
		{"gitlink/config", "git"}, // a symlink to .git
		{"hooks/post-checkout", "git"},
		{"sublink/.git", "git"},
		{"./x/../.git/config", "git"},
		{"Makefile", "make_check"},
		{"lib/makefile", "make_check"}, // globs without / match at any depth, any case
		{"web/.npmrc", "npm_test"},
		{"scripts/a/b/run.sh", "run_script"},
	}
	for _, c := range refused {
		t.Run("refused "+c.path, func(t *testing.T) {
			for _, call := range []struct{ tool, args string }{
				{"write_file", `{"path":` + jsonString(c.path) + `,"content":"[core]\n\tfsmonitor = touch /tmp/pwned\n","create_dirs":true}`},
				{"edit_file", `{"path":` + jsonString(c.path) + `,"old_string":"a","new_string":"b","expected_sha256":"` + sum("x") + `"}`},
			} {
				_, err := tw.exec(t, call.tool, call.args)
				te := wantErr(t, err, tools.PermissionError, "protected_path")
				if !strings.Contains(te.Message, c.by) || !strings.Contains(te.Message, "is protected") {
					t.Errorf("%s: the message does not name the file and %s: %s", call.tool, c.by, te.Message)
				}
			}
		})
	}
	if got := tw.read(t, ".git/config"); got != "[core]\n" {
		t.Errorf(".git/config changed: %q", got)
	}
	for _, p := range []string{".gitignore", ".github/workflows/ci.yml", "git/config", "a.git/config", "my.git", ".gitx/config",
		"web/sub/.npmrc", "scripts/run.py", "Makefile.md", "ok/notes2.md"} {
		t.Run("written "+p, func(t *testing.T) {
			_, err := tw.exec(t, "write_file", `{"path":`+jsonString(p)+`,"content":"x","create_dirs":true}`)
			mustOK(t, err)
		})
	}
	tw.checkOutside(t)
}

// TestAllowProtected: the operator may let the file tools change protected
// files; both writing tools then need confirmation for every call.
func TestAllowProtected(t *testing.T) {
	for _, allow := range []bool{false, true} {
		tw := newTestWS(t, Options{AllowProtected: allow})
		for _, name := range []string{"write_file", "edit_file"} {
			if got := tw.tool(t, name).Spec().Confirmation.Required(); got != allow {
				t.Errorf("allow_protected %v: %s needs confirmation %v", allow, name, got)
			}
		}
		_, err := tw.exec(t, "write_file", `{"path":".git/config","content":"x","create_dirs":true}`)
		if allow {
			mustOK(t, err)
		} else {
			wantErr(t, err, tools.PermissionError, "protected_path")
		}
	}
	if _, err := New(t.TempDir(), Options{Protected: []Protected{{Pattern: "/etc/passwd", By: "x"}}}); err == nil {
		t.Error("an absolute executes pattern was accepted")
	}
	if _, err := New(t.TempDir(), Options{Protected: []Protected{{Pattern: "../up/Makefile", By: "x"}}}); err == nil {
		t.Error("an executes pattern outside the workspace was accepted")
	}
	if _, err := New(t.TempDir(), Options{Protected: []Protected{{Pattern: "a[", By: "x"}}}); err == nil {
		t.Error("a broken executes pattern was accepted")
	}
}

// FuzzProtectedPath: no spelling of a path under .git that the workspace's
// file system resolves to .git gets past the check, and the check never
// panics on hostile names.
func FuzzProtectedPath(f *testing.F) {
	for _, s := range []string{".git/config", ".GIT", "a/.git./b", "git~1", ".g\u200cit", "x", "", "..", "a/../.git"} {
		f.Add(s)
	}
	p, err := newProtection(ospath.Host(), nil, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		by := p.executor(s)
		// Whatever a case-insensitive, HFS+-ignoring comparison calls .git
		// must be protected: strip the ignorables and fold case ourselves.
		for _, c := range strings.Split(s, "/") {
			plain := strings.Map(func(r rune) rune {
				if ospath.HFSIgnored(r) {
					return -1
				}
				return r
			}, c)
			if strings.EqualFold(strings.TrimRight(plain, ". "), ".git") && by == "" {
				t.Fatalf("%q is not protected", s)
			}
		}
	})
}

// TestWriteGitConfigRefused is the attack, with the default
// options: write core.fsmonitor into .git/config, which git_status would
// then run. It is refused and the file is unchanged.
func TestWriteGitConfigRefused(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{".git/config": "[core]\n"})
	_, err := tw.exec(t, "write_file", `{"path":".git/config","content":"[core]\n\tfsmonitor = touch pwned\n","expected_sha256":"`+sum("[core]\n")+`"}`)
	wantErr(t, err, tools.PermissionError, "protected_path")
	_, err = tw.exec(t, "edit_file", `{"path":".git/config","old_string":"[core]\n","new_string":"[core]\n\tfsmonitor = touch pwned\n","expected_sha256":"`+sum("[core]\n")+`"}`)
	wantErr(t, err, tools.PermissionError, "protected_path")
	if got := tw.read(t, ".git/config"); got != "[core]\n" {
		t.Errorf(".git/config changed: %q", got)
	}
}
