// Package ospath holds the rules by which each operating system's file
// system names a file: which bytes separate names, what a volume is (a
// drive letter, a UNC share, \\?\ and \\.\ device paths), whether case
// matters (APFS and NTFS ignore it by default), and which other spellings
// it resolves to the same name (NTFS: a name:stream is the name, trailing
// dots and spaces are dropped, GIT~1 is .git's short name; HFS+ drops some
// invisible code points). Every rule is a method of a Platform value, so
// the tests run macOS's and Windows's rules on Linux; Host is this
// machine's. It imports only the standard library: the file tools, the
// state store and cmd/toold all use it.
package ospath

import (
	"errors"
	"path"
	"runtime"
	"strings"
)

// Platform describes how one OS's file system names files.
type Platform struct {
	// OS is the GOOS it describes.
	OS string
	// Separators are the bytes that separate names; the first is the one
	// paths are written with.
	Separators string
	// Volumes: a path may begin with a drive letter (C:), a UNC share
	// (\\server\share) or a device path (\\?\, \\.\).
	Volumes bool
	// FoldCase: names that differ only in case are the same file.
	FoldCase bool
	// NTFS: name:stream[:type] names a stream of name, trailing dots and
	// spaces are dropped, CON, NUL, COM1... are devices, and GIT~1 is the
	// short name of .git.
	NTFS bool
	// HFS: the code points HFS+ ignores in names are ignored.
	HFS bool
}

// The platforms toold builds for.
var (
	Linux   = Platform{OS: "linux", Separators: "/"}
	Darwin  = Platform{OS: "darwin", Separators: "/", FoldCase: true, HFS: true}
	Windows = Platform{OS: "windows", Separators: `\/`, Volumes: true, FoldCase: true, NTFS: true}
)

// For is the platform of goos (Linux's rules for any other Unix).
func For(goos string) Platform {
	switch goos {
	case "darwin", "ios":
		return Darwin
	case "windows":
		return Windows
	}
	return Linux
}

// Host is this machine's platform.
func Host() Platform { return For(runtime.GOOS) }

// Guarded is p with every aliasing rule of every file system on: what the
// protections (.git, executes:) compare with. A workspace on Linux may be
// a case-insensitive mount (ext4 casefold, vfat, SMB), and a checkout is
// shared between machines, so refusing a few more spellings than the file
// system needs costs nothing. Separators and volumes stay p's: they decide
// what a path is, not which names alias.
func (p Platform) Guarded() Platform {
	p.FoldCase, p.NTFS, p.HFS = true, true, true
	return p
}

// IsSep says whether c separates names.
func (p Platform) IsSep(c byte) bool { return strings.IndexByte(p.Separators, c) >= 0 }

// sep is the separator paths are written with.
func (p Platform) sep() string { return p.Separators[:1] }

// VolumeName is the volume p begins with ("C:", `\\server\share`,
// `\\?\C:`, `\\.\pipe`), or "".
func (p Platform) VolumeName(s string) string {
	if !p.Volumes {
		return ""
	}
	if len(s) >= 2 && s[1] == ':' && isLetter(s[0]) {
		return s[:2]
	}
	if len(s) < 3 || !p.IsSep(s[0]) || !p.IsSep(s[1]) {
		return ""
	}
	// \\?\X, \\.\X (device paths: the next name is the device, or the
	// drive and more), \\server\share (UNC).
	rest := s[2:]
	n := 2
	if rest[0] == '?' || rest[0] == '.' {
		if len(rest) < 2 || !p.IsSep(rest[1]) {
			return s[:2+len(rest)]
		}
		return s[:4+p.nameEnd(rest[2:])]
	}
	n += p.nameEnd(rest)
	if n < len(s) {
		n += 1 + p.nameEnd(s[n+1:])
	}
	return s[:n]
}

// nameEnd is the length of the first name of s.
func (p Platform) nameEnd(s string) int {
	for i := 0; i < len(s); i++ {
		if p.IsSep(s[i]) {
			return i
		}
	}
	return len(s)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// IsAbs says whether s names a file without a working directory: it
// begins with a separator (on Windows, the root of the current drive) or a
// volume (on Windows C:foo too, which depends on the drive's own working
// directory: never a path inside a workspace).
func (p Platform) IsAbs(s string) bool {
	return s != "" && (p.IsSep(s[0]) || p.VolumeName(s) != "")
}

// Split is s's names, separated by any of p's separators (empty names
// dropped).
func (p Platform) Split(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r < 0x80 && p.IsSep(byte(r)) })
}

// The reasons Local refuses a path.
var (
	ErrAbsolute = errors.New("absolute path")
	ErrEscape   = errors.New("path leaves its directory")
	ErrName     = errors.New("not a file name here")
)

// Local is s as a slash-separated path below a directory, cleaned, or why
// it is not one: an absolute path or a volume (ErrAbsolute), a path that
// climbs out with ".." (ErrEscape), or, on NTFS, a name with ':' (a
// stream, or a drive) or a device name such as CON or COM1 (ErrName).
// Go's filepath.IsLocal says the same on each OS; this is the rule as a
// function of the platform.
func (p Platform) Local(s string) (string, error) {
	if p.IsAbs(s) {
		return "", ErrAbsolute
	}
	names := p.Split(s)
	if p.NTFS {
		for _, n := range names {
			if strings.IndexByte(n, ':') >= 0 || isDevice(n) {
				return "", ErrName
			}
		}
	}
	clean := path.Clean(strings.Join(names, "/"))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", ErrEscape
	}
	return clean, nil
}

// isDevice says whether name is an NTFS device name (CON, PRN, AUX, NUL,
// COM1-9, LPT1-9, CONIN$, CONOUT$), with or without an extension: older
// Windows reserve "CON.txt" too, so it is refused everywhere.
func isDevice(name string) bool {
	base := name
	if i := strings.IndexAny(base, ".:"); i >= 0 {
		base = base[:i]
	}
	base = strings.ToUpper(strings.TrimRight(base, " "))
	switch base {
	case "CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$":
		return true
	}
	if len(base) >= 4 && (strings.HasPrefix(base, "COM") || strings.HasPrefix(base, "LPT")) {
		switch base[3:] {
		case "1", "2", "3", "4", "5", "6", "7", "8", "9", "\u00b9", "\u00b2", "\u00b3":
			return true
		}
	}
	return false
}

// Join joins names with p's separator, cleaned; a leading volume (a drive,
// a UNC share) is kept as it is.
func (p Platform) Join(elem ...string) string {
	s := strings.Join(elem, p.sep())
	vol := p.VolumeName(s)
	rest := s[len(vol):]
	rooted := rest != "" && p.IsSep(rest[0])
	joined := path.Clean(strings.Join(p.Split(rest), "/"))
	if rooted {
		joined = "/" + joined
		if joined == "/." {
			joined = "/"
		}
	}
	return vol + strings.ReplaceAll(joined, "/", p.sep())
}

// Base is s's last name.
func (p Platform) Base(s string) string {
	names := p.Split(s[len(p.VolumeName(s)):])
	if len(names) == 0 {
		return p.sep()
	}
	return names[len(names)-1]
}
