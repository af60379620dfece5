package fs

import (
	"testing"

	"github.com/toold/toold/internal/ospath"
	"github.com/toold/toold/internal/tools"
)

// TestProtectionsOnEveryPlatform runs what write_file checks before it
// touches the disk — the path (resolvePathOn) and the protected files
// (.git, executes:) — by Linux's, macOS's and Windows's rules, on this
// machine: Windows's separators, drives, UNC shares, \\?\ paths, streams
// and device names, and the case APFS and NTFS ignore.
func TestProtectionsOnEveryPlatform(t *testing.T) {
	const (
		ok   = "written"
		prot = "protected"
	)
	list := []Protected{{Pattern: "Makefile", By: "make"}, {Pattern: `scripts\*.ps1`, By: "pwsh"}}
	for _, c := range []struct {
		in                     string
		linux, darwin, windows string // ok, prot, or the refusal's code
	}{
		{".git/config", prot, prot, prot},
		{".GIT/config", prot, prot, prot}, // APFS, NTFS; a case-insensitive mount on Linux
		{`.git\config`, ok, ok, prot},     // one name on Linux and macOS, .git/config on Windows
		{`sub\.git\hooks\pre-commit`, ok, ok, prot},
		{`x\..\.git\config`, ok, ok, prot},
		{`..\outside.txt`, ok, ok, "path_escape"},
		{`C:\Users\me\.ssh\id_ed25519`, ok, ok, "absolute_path"},
		{`C:secret.txt`, ok, ok, "absolute_path"},
		{`\\?\C:\Windows\win.ini`, ok, ok, "absolute_path"},
		{`\\server\share\x`, ok, ok, "absolute_path"},
		{`\Windows\win.ini`, ok, ok, "absolute_path"},
		{"notes.txt:hidden", ok, ok, "invalid_name"},
		{".git::$INDEX_ALLOCATION/config", prot, prot, "invalid_name"},
		{"Makefile::$DATA", prot, prot, "invalid_name"},
		{"logs/nul", ok, ok, "invalid_name"},
		{"GIT~1/config", prot, prot, prot},
		{".git./config", prot, prot, prot},
		{"lib/MAKEFILE", prot, prot, prot},
		{"scripts/deploy.ps1", ok, ok, prot}, // the pattern's backslash separates on Windows only
		{"readme.md", ok, ok, ok},
	} {
		for _, pc := range []struct {
			p    ospath.Platform
			want string
		}{{ospath.Linux, c.linux}, {ospath.Darwin, c.darwin}, {ospath.Windows, c.windows}} {
			if got := writeVerdict(t, pc.p, list, c.in); got != pc.want {
				t.Errorf("%s: %q is %s, want %s", pc.p.OS, c.in, got, pc.want)
			}
		}
	}
}

// writeVerdict is what write_file's lexical checks say of path on plat.
func writeVerdict(t *testing.T, plat ospath.Platform, list []Protected, path string) string {
	t.Helper()
	p, err := newProtection(plat, list, false)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := resolvePathOn(plat, path)
	if err != nil {
		te, ok := tools.AsError(err)
		if !ok {
			t.Fatalf("untyped %v", err)
		}
		return string(te.Code)
	}
	if p.executor(rel) != "" {
		return "protected"
	}
	return "written"
}
