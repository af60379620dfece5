package fs

import (
	"fmt"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toold/toold/internal/ospath"
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
// to .git does not get around it. The spellings are ospath's (Guarded: every
// file system's aliasing, on every OS, since a Linux workspace may be a
// case-insensitive mount and a checkout moves between machines).

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
	plat  ospath.Platform // the workspace's rules, every aliasing on (Guarded)
	globs []Protected     // patterns canonical and anchored
	allow bool            // AllowProtected: writes pass (the tools need confirmation)
}

// CheckProtected reports the first pattern of list that is not a glob
// relative to the workspace, naming its tool; New refuses the same.
func CheckProtected(list []Protected) error {
	_, err := newProtection(ospath.Host(), list, false)
	return err
}

// newProtection compiles list by plat's rules: on Windows a backslash in
// a pattern separates names (it would escape the next byte in a glob).
func newProtection(plat ospath.Platform, list []Protected, allow bool) (*protection, error) {
	p := &protection{plat: plat.Guarded(), allow: allow}
	for _, g := range list {
		pat := strings.ToLower(strings.TrimPrefix(plat.PatternToSlash(g.Pattern), "./"))
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
	canon := p.plat.Canonical(rel)
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
				"so writing it could run a program without anyone confirming", what, by).WithCode(tools.CodeProtectedPath).
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
