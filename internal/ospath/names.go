package ospath

import "strings"

// Canonical is rel (slash-separated, below a directory) spelled as p's
// file system compares names: each name lower-cased where case does not
// matter, without the code points HFS+ drops, without NTFS's trailing dots
// and spaces or a stream (name:stream is name), and NTFS's short name of
// .git (GIT~1) as .git. Git refuses the same spellings in the trees it
// checks out (is_hfs_dotgit, is_ntfs_dotgit) for the same reason. Two
// paths name the same file only if their Canonical forms are equal (the
// converse needs the disk: other short names, links).
func (p Platform) Canonical(rel string) string {
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		parts[i] = p.CanonicalName(c)
	}
	return strings.Join(parts, "/")
}

// CanonicalName is one name as p's file system compares it (Canonical).
func (p Platform) CanonicalName(c string) string {
	if p.HFS {
		c = strings.Map(func(r rune) rune {
			if HFSIgnored(r) {
				return -1
			}
			return r
		}, c)
	}
	if p.NTFS {
		if i := strings.IndexByte(c, ':'); i > 0 { // name:stream is name
			c = c[:i]
		}
		c = strings.TrimRight(c, ". ")
		if c == "" { // "..." and the like are not names to protect
			return "_"
		}
	}
	if p.FoldCase {
		c = strings.ToLower(c)
	}
	if p.NTFS && strings.EqualFold(c, "git~1") {
		return ".git"
	}
	return c
}

// HFSIgnored says whether HFS+ ignores r: the code points HFS+ leaves out of a name when it
// compares names (the list git's utf8.c uses).
func HFSIgnored(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// Fold is an absolute path as p compares paths: its separators as "/",
// and lower-cased where case does not matter. Equal Folds name one file
// (lexically: links are the caller's to resolve first).
func (p Platform) Fold(s string) string {
	vol := p.VolumeName(s)
	rest := s[len(vol):]
	out := strings.ToLower(strings.Map(func(r rune) rune {
		if r < 0x80 && p.IsSep(byte(r)) {
			return '/'
		}
		return r
	}, vol)) + "/" + strings.Join(p.Split(rest), "/")
	if p.FoldCase {
		out = strings.ToLower(out)
	}
	return out
}

// Within says whether target is dir or lies below it, both absolute and
// with their links resolved, as p's file system compares names: on macOS
// and Windows /Users/me/Work and /users/me/work/state are one tree.
func (p Platform) Within(dir, target string) bool {
	d, t := p.Fold(dir), p.Fold(target)
	return t == d || strings.HasPrefix(t, strings.TrimSuffix(d, "/")+"/")
}

// ProgramName is the name a program is known by: its file's base name,
// lower-cased where case does not matter, and on Windows without the
// extension that makes it runnable (git.exe, GIT.EXE and git.cmd are git).
func (p Platform) ProgramName(program string) string {
	name := p.Base(program)
	if p.FoldCase {
		name = strings.ToLower(name)
	}
	if p.NTFS {
		for _, ext := range []string{".exe", ".com", ".cmd", ".bat"} {
			if strings.HasSuffix(strings.ToLower(name), ext) {
				return name[:len(name)-len(ext)]
			}
		}
	}
	return name
}

// PatternToSlash is a glob an operator wrote (executes:) with p's
// separators as "/": on Windows `scripts\*.ps1` is scripts/*.ps1, since a
// backslash there separates names rather than escaping the next byte.
func (p Platform) PatternToSlash(pattern string) string {
	if !p.IsSep('\\') {
		return pattern
	}
	return strings.ReplaceAll(pattern, `\`, "/")
}

// StateHome is the directory an application named app keeps its state in
// for the user, by p's convention: $XDG_STATE_HOME/app or
// ~/.local/state/app on Linux, ~/Library/Application Support/app on macOS,
// %LOCALAPPDATA%\app on Windows (else %USERPROFILE%\AppData\Local\app).
// home is the home directory to fall back on; "" when there is none.
func (p Platform) StateHome(app string, lookupEnv func(string) (string, bool), home string) (string, bool) {
	env := func(k string) string {
		if v, ok := lookupEnv(k); ok && p.IsAbs(v) {
			return v
		}
		return ""
	}
	switch p.OS {
	case "windows":
		if d := env("LOCALAPPDATA"); d != "" {
			return p.Join(d, app), true
		}
		if h := env("USERPROFILE"); h != "" {
			home = h
		}
		return p.Join(home, "AppData", "Local", app), home != ""
	case "darwin":
		if h := env("HOME"); h != "" {
			home = h
		}
		return p.Join(home, "Library", "Application Support", app), home != ""
	}
	if d := env("XDG_STATE_HOME"); d != "" {
		return p.Join(d, app), true
	}
	if h, ok := lookupEnv("HOME"); ok && h != "" {
		home = h
	}
	return p.Join(home, ".local", "state", app), home != ""
}
