package fs

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toold/toold/internal/tools"
)

// A write becomes code execution when the file written is one some other
// tool runs, or reads as configuration that names a program: .git/config
// (core.fsmonitor, hooks, aliases, filters), a Makefile, .npmrc, .envrc.
// A model that may write files and call a "read-only" git_status would
// then run any command it likes, with no confirmation. So write_file and
// edit_file refuse the protected files: everything under a .git directory
// or named .git (any depth, any case, the spellings case-insensitive and
// HFS+/NTFS file systems treat as .git), and every file a declared tool
// says it executes (its executes: globs). The check is made on the path as
// given and on the path with the workspace's symlinks followed, so a link
// to .git does not get around it.

// Protected is a glob of workspace files a tool executes or reads as
// configuration, and that tool's name (for the refusal's message).
type Protected struct {
	// Pattern is a doublestar glob relative to the workspace root. One
	// without a "/" matches the base name at any depth ("Makefile" is
	// every Makefile); matching ignores case.
	Pattern string
	// By names the tool that executes the files.
	By string
}

// gitBy is what the built-in .git rule names as the file's executor.
const gitBy = "git (every git command run in the workspace reads it; .git/config and hooks name programs git runs)"

// protection is the compiled protected set.
type protection struct {
	globs []Protected // patterns lower-cased and anchored
	allow bool        // AllowProtected: writes pass (the tools need confirmation)
}

// CheckProtected reports the first pattern of list that is not a glob
// relative to the workspace, naming its tool; New refuses the same.
func CheckProtected(list []Protected) error {
	_, err := newProtection(list, false)
	return err
}

func newProtection(list []Protected, allow bool) (*protection, error) {
	p := &protection{allow: allow}
	for _, g := range list {
		pat := strings.ToLower(strings.TrimPrefix(g.Pattern, "./"))
		if pat == "" || strings.HasPrefix(pat, "/") || !localPath(path.Clean(pat)) || !doublestar.ValidatePattern(pat) {
			return nil, fmt.Errorf("executes of %s: %q is not a glob relative to the workspace", g.By, g.Pattern)
		}
		if !strings.Contains(pat, "/") {
			pat = "**/" + pat
		}
		p.globs = append(p.globs, Protected{Pattern: pat, By: g.By})
	}
	return p, nil
}

// executor returns the tool that executes rel (slash-separated, clean),
// or "" when rel is not protected.
func (p *protection) executor(rel string) string {
	canon := canonicalPath(rel)
	for _, c := range strings.Split(canon, "/") {
		if c == ".git" {
			return gitBy
		}
	}
	for _, g := range p.globs {
		if ok, _ := doublestar.Match(g.Pattern, canon); ok {
			return g.By
		}
	}
	return ""
}

// canonicalPath spells rel as a case-insensitive file system that ignores
// what HFS+ and NTFS ignore would resolve it: each component lower-cased,
// without the code points HFS+ drops, without NTFS's trailing dots and
// spaces or an alternate data stream, and NTFS's short name of .git
// (GIT~1) as .git. Git refuses the same spellings in trees it checks out
// (is_hfs_dotgit, is_ntfs_dotgit) for the same reason.
func canonicalPath(rel string) string {
	parts := strings.Split(rel, "/")
	for i, c := range parts {
		parts[i] = canonicalName(c)
	}
	return strings.Join(parts, "/")
}

func canonicalName(c string) string {
	c = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, c)
	if i := strings.IndexByte(c, ':'); i > 0 { // NTFS: name:stream is name
		c = c[:i]
	}
	c = strings.ToLower(strings.TrimRight(c, ". "))
	if c == "" { // "..." and the like are not names to protect
		return "_"
	}
	if c == "git~1" {
		return ".git"
	}
	return c
}

// hfsIgnored are the code points HFS+ leaves out of a name when it
// compares names (the list git's utf8.c uses).
func hfsIgnored(r rune) bool {
	return r >= 0x200c && r <= 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x206a && r <= 0x206f || r == 0xfeff
}

// checkProtected refuses a write to a protected file, unless the operator
// allowed protected writes (the tools then need confirmation).
func (w *Workspace) checkProtected(rel string) error {
	if w.protect.allow {
		return nil
	}
	for _, p := range []string{rel, w.followLinks(rel)} {
		if by := w.protect.executor(p); by != "" {
			what := show(rel)
			if p != rel {
				what = fmt.Sprintf("%s (through a symbolic link, %s)", show(rel), show(p))
			}
			return tools.NewPermissionError("%s is protected: %s executes it or reads it as configuration, "+
				"so writing it could run a program without anyone confirming", what, by).WithCode("protected_path").
				WithSuggestion("change other files; a person can edit this one, or the operator can set fs.allow_protected " +
					"(each write_file and edit_file call then needs confirmation)")
		}
	}
	return nil
}

// maxLinkHops bounds followLinks like the kernel's MAXSYMLINKS.
const maxLinkHops = 40

// followLinks returns rel with the symbolic links of the workspace in its
// existing components followed, lexically confined to the workspace. A
// link that leads out, or a loop, ends the walk: os.Root refuses such a
// path when the write uses it.
func (w *Workspace) followLinks(rel string) string {
	done, todo := "", strings.Split(rel, "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		next := path.Join(done, c)
		if c == "." || c == "" {
			continue
		}
		if c == ".." {
			done = path.Dir(done)
			if done == "." {
				done = ""
			}
			continue
		}
		target, err := w.root.Readlink(next)
		if err != nil { // not a link, or not there: the rest is as written
			done = next
			continue
		}
		if hops++; hops > maxLinkHops || path.IsAbs(target) {
			return path.Join(append([]string{next}, todo...)...)
		}
		joined := path.Join(done, target)
		if !localPath(joined) {
			return path.Join(append([]string{next}, todo...)...)
		}
		todo = append(strings.Split(joined, "/"), todo...)
		done = ""
	}
	if done == "" {
		return "."
	}
	return done
}

func localPath(p string) bool {
	return p != ".." && !strings.HasPrefix(p, "../") && !path.IsAbs(p)
}
