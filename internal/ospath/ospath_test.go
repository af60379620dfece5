package ospath

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocal: what each platform takes as a path inside a directory, and
// why it refuses the rest: Windows's separators, drives, UNC shares,
// device paths, streams and device names are plain names on Linux.
func TestLocal(t *testing.T) {
	for _, c := range []struct {
		in                    string
		linux, darwin, window string // the clean path, or the error's text
	}{
		{"a/b/../c", "a/c", "a/c", "a/c"},
		{`.git\config`, `.git\config`, `.git\config`, ".git/config"},
		{`src\..\..\x`, `src\..\..\x`, `src\..\..\x`, "path leaves its directory"},
		{"../x", "path leaves its directory", "path leaves its directory", "path leaves its directory"},
		{"/etc/passwd", "absolute path", "absolute path", "absolute path"},
		{`\Windows\win.ini`, `\Windows\win.ini`, `\Windows\win.ini`, "absolute path"},
		{`C:\Users\me`, `C:\Users\me`, `C:\Users\me`, "absolute path"},
		{`C:foo`, "C:foo", "C:foo", "absolute path"},
		{`\\?\C:\x`, `\\?\C:\x`, `\\?\C:\x`, "absolute path"},
		{`\\.\pipe\toold`, `\\.\pipe\toold`, `\\.\pipe\toold`, "absolute path"},
		{`\\server\share\x`, `\\server\share\x`, `\\server\share\x`, "absolute path"},
		{"//server/share/x", "absolute path", "absolute path", "absolute path"},
		{"file.txt:secret", "file.txt:secret", "file.txt:secret", "not a file name here"},
		{".git::$INDEX_ALLOCATION/config", ".git::$INDEX_ALLOCATION/config", ".git::$INDEX_ALLOCATION/config", "not a file name here"},
		{"logs/CON", "logs/CON", "logs/CON", "not a file name here"},
		{"nul.txt", "nul.txt", "nul.txt", "not a file name here"},
		{"COM1", "COM1", "COM1", "not a file name here"},
		{"console.log", "console.log", "console.log", "console.log"},
		{".", ".", ".", "."},
	} {
		for _, pc := range []struct {
			p    Platform
			want string
		}{{Linux, c.linux}, {Darwin, c.darwin}, {Windows, c.window}} {
			got, err := pc.p.Local(c.in)
			if err != nil {
				got = err.Error()
			}
			if got != pc.want {
				t.Errorf("%s: Local(%q) = %q, want %q", pc.p.OS, c.in, got, pc.want)
			}
		}
	}
}

// TestCanonical: the spellings each file system resolves to .git/config,
// and what Guarded (the protections' rules) adds on Linux.
func TestCanonical(t *testing.T) {
	for _, c := range []struct {
		in                            string
		linux, darwin, windows, guard string
	}{
		{".GIT/config", ".GIT/config", ".git/config", ".git/config", ".git/config"},
		{".git./config", ".git./config", ".git./config", ".git/config", ".git/config"},
		{".git /config", ".git /config", ".git /config", ".git/config", ".git/config"},
		{"GIT~1/config", "GIT~1/config", "git~1/config", ".git/config", ".git/config"},
		{".git::$INDEX_ALLOCATION/config", ".git::$INDEX_ALLOCATION/config", ".git::$index_allocation/config", ".git/config", ".git/config"},
		{".g\u200cit/config", ".g\u200cit/config", ".git/config", ".g\u200cit/config", ".git/config"},
		{"Makefile:x", "Makefile:x", "makefile:x", "makefile", "makefile"},
		{"a.git/config", "a.git/config", "a.git/config", "a.git/config", "a.git/config"},
	} {
		for _, pc := range []struct {
			p    Platform
			want string
		}{{Linux, c.linux}, {Darwin, c.darwin}, {Windows, c.windows}, {Linux.Guarded(), c.guard}} {
			if got := pc.p.Canonical(c.in); got != pc.want {
				t.Errorf("%s: Canonical(%q) = %q, want %q", pc.p.OS, c.in, got, pc.want)
			}
		}
	}
}

// TestWithin: toold's own files inside the workspace, as each file system
// compares names: the case of a Mac's or a Windows path does not hide them.
func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p           Platform
		dir, target string
		want        bool
	}{
		{Linux, "/home/u/ws", "/home/u/ws/.state", true},
		{Linux, "/home/u/ws", "/home/u/WS/.state", false},
		{Linux, "/home/u/ws", "/home/u/ws2", false},
		{Darwin, "/Users/me/Work", "/users/me/work/state", true},
		{Darwin, "/Users/me/Work", "/Users/me/Workshop", false},
		{Windows, `C:\Users\me\proj`, `c:\users\ME\Proj\toold.yaml`, true},
		{Windows, `C:\Users\me\proj`, `C:/Users/me/proj/state`, true},
		{Windows, `C:\Users\me\proj`, `D:\Users\me\proj`, false},
		{Windows, `C:\`, `c:\anything`, true},
	} {
		if got := c.p.Within(c.dir, c.target); got != c.want {
			t.Errorf("%s: Within(%q, %q) = %v, want %v", c.p.OS, c.dir, c.target, got, c.want)
		}
	}
}

// TestStateHome: each platform's convention for a user's state, and the
// fallbacks.
func TestStateHome(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, c := range []struct {
		p    Platform
		env  map[string]string
		home string
		want string
	}{
		{Linux, map[string]string{"XDG_STATE_HOME": "/x/state", "HOME": "/home/u"}, "", "/x/state/toold"},
		{Linux, map[string]string{"XDG_STATE_HOME": "relative", "HOME": "/home/u"}, "", "/home/u/.local/state/toold"},
		{Darwin, map[string]string{"HOME": "/Users/me", "XDG_STATE_HOME": "/x"}, "", "/Users/me/Library/Application Support/toold"},
		{Darwin, nil, "/Users/you", "/Users/you/Library/Application Support/toold"},
		{Windows, map[string]string{"LOCALAPPDATA": `C:\Users\me\AppData\Local`}, "", `C:\Users\me\AppData\Local\toold`},
		{Windows, map[string]string{"USERPROFILE": `D:\me`}, "", `D:\me\AppData\Local\toold`},
		{Windows, map[string]string{"LOCALAPPDATA": `relative`}, `C:\Users\you`, `C:\Users\you\AppData\Local\toold`},
	} {
		got, ok := c.p.StateHome("toold", env(c.env), c.home)
		if !ok || got != c.want {
			t.Errorf("%s %v: %q %v, want %q", c.p.OS, c.env, got, ok, c.want)
		}
	}
	if _, ok := Windows.StateHome("toold", env(nil), ""); ok {
		t.Error("no home and no LOCALAPPDATA gave a directory")
	}
}

// TestProgramName: git is git however the platform spells its file.
func TestProgramName(t *testing.T) {
	for _, c := range []struct {
		p        Platform
		in, want string
	}{
		{Linux, "/usr/bin/git", "git"},
		{Linux, "/usr/bin/Git", "Git"},
		{Darwin, "/opt/homebrew/bin/Git", "git"},
		{Windows, `C:\Program Files\Git\cmd\git.exe`, "git"},
		{Windows, `C:\tools\GIT.CMD`, "git"},
		{Windows, `C:\tools\git.sh`, "git.sh"},
	} {
		if got := c.p.ProgramName(c.in); got != c.want {
			t.Errorf("%s: ProgramName(%q) = %q, want %q", c.p.OS, c.in, got, c.want)
		}
	}
}

// TestJoinAndVolumes: Windows paths are joined with backslashes, their
// volumes kept.
func TestJoinAndVolumes(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Windows.Join(`C:\Users\me`, "AppData", "Local"), `C:\Users\me\AppData\Local`},
		{Windows.Join(`\\server\share`, "toold"), `\\server\share\toold`},
		{Windows.Join(`C:\`, "x"), `C:\x`},
		{Darwin.Join("/Users/me", "Library", "Application Support"), "/Users/me/Library/Application Support"},
		{Windows.VolumeName(`\\?\C:\x`), `\\?\C:`},
		{Windows.VolumeName(`\\server\share\x`), `\\server\share`},
		{Windows.VolumeName(`c:x`), "c:"},
		{Linux.VolumeName(`C:\x`), ""},
		{Windows.Base(`C:\a\b.txt`), "b.txt"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

// FuzzLocal: no platform's Local accepts a path that leaves its directory
// or is absolute, the Guarded canonical form never panics, and on Linux
// Local agrees with filepath.IsLocal (the host's rule, on CI's machine).
func FuzzLocal(f *testing.F) {
	for _, s := range []string{"a/b", "../x", `C:\x`, `\\?\C:`, "a:b", "CON", ".git/config", "", "..", `a\..\..\b`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range []Platform{Linux, Darwin, Windows} {
			got, err := p.Local(s)
			if err != nil {
				if !errors.Is(err, ErrAbsolute) && !errors.Is(err, ErrEscape) && !errors.Is(err, ErrName) {
					t.Fatalf("%s: %q: unexpected error %v", p.OS, s, err)
				}
				continue
			}
			if got == ".." || strings.HasPrefix(got, "../") || strings.HasPrefix(got, "/") || p.IsAbs(got) {
				t.Fatalf("%s: Local(%q) = %q leaves its directory", p.OS, s, got)
			}
			_ = p.Guarded().Canonical(got)
		}
		if s != "" && filepath.Separator == '/' {
			_, err := Linux.Local(s)
			if (err == nil) != filepath.IsLocal(s) {
				t.Fatalf("Local(%q): %v, filepath.IsLocal %v", s, err, filepath.IsLocal(s))
			}
		}
	})
}
