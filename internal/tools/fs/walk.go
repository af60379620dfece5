package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/toold/toold/internal/tools"
)

// globSet is a validated set of doublestar patterns and the directories a
// walk must start from to find everything they can match.
type globSet struct {
	patterns []string
	bases    []string // disjoint subtrees, in walk order
	withGit  bool     // a pattern names .git, so .git directories are walked
}

// namesGit spots ".git" as a whole path component or brace alternative, so
// "**/.gitignore" does not count as asking for .git directories.
var namesGit = regexp.MustCompile(`(^|[/{,])\.git($|[/},])`)

// compileGlobs checks each pattern like a path (no NUL, not absolute, no
// climbing out) and as a glob, pointing the model at the faulty one.
func compileGlobs(patterns []string, field string) (*globSet, error) {
	g := &globSet{}
	for i, p := range patterns {
		ptr := field
		if len(patterns) > 1 || field == "/patterns" {
			ptr = fmt.Sprintf("%s/%d", field, i)
		}
		clean, err := resolvePath(p)
		if err != nil {
			return nil, err
		}
		if !doublestar.ValidatePattern(clean) {
			e := tools.NewUserError("%s is not a valid glob pattern", show(p)).WithCode("invalid_glob").
				WithSuggestion("use doublestar syntax: * within a name, ** across directories, {a,b} alternatives, [abc] classes; for example \"src/**/*.{go,md}\"")
			e.Fields = []tools.FieldError{{Pointer: ptr, Message: "is not a valid glob pattern"}}
			return nil, e
		}
		base, _ := doublestar.SplitPattern(clean)
		g.patterns = append(g.patterns, clean)
		g.bases = append(g.bases, base)
		g.withGit = g.withGit || namesGit.MatchString(clean)
	}
	g.bases = disjointBases(g.bases)
	return g, nil
}

// disjointBases sorts bases in walk order and drops those inside another,
// so every entry is visited once and the walks together yield sorted paths.
func disjointBases(bases []string) []string {
	slices.SortFunc(bases, comparePaths)
	var out []string
	for _, b := range bases {
		if n := len(out); n > 0 && (out[n-1] == "." || b == out[n-1] || strings.HasPrefix(b, out[n-1]+"/")) {
			continue
		}
		out = append(out, b)
	}
	return out
}

// comparePaths orders paths component by component, the order fs.WalkDir
// visits them in ("a", "a/b", "a.txt"), so sorted output needs no sort pass.
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, "/")
		y, b, _ = strings.Cut(b, "/")
		if c := strings.Compare(x, y); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func (g *globSet) match(p string) bool {
	for _, pat := range g.patterns {
		if doublestar.MatchUnvalidated(pat, p) {
			return true
		}
	}
	return false
}

// walk calls fn for every entry that matches one of g's patterns, each once,
// in comparePaths order. The walk goes through root.FS(), which never
// follows a symlink out: symlinks are reported, not descended. .git
// directories are skipped unless a pattern names .git: they are large and
// rarely what a model wants. ctx is checked at every entry.
func (w *Workspace) walk(ctx context.Context, g *globSet, fn func(p string, d iofs.DirEntry) error) error {
	for _, base := range g.bases {
		err := iofs.WalkDir(w.fsys, base, func(p string, d iofs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			if err != nil {
				return w.walkError(p, base, err)
			}
			if d.IsDir() && d.Name() == ".git" && !g.withGit {
				return iofs.SkipDir
			}
			if p == "." || !g.match(p) {
				return nil
			}
			return fn(p, d)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// walkError decides what a walk does with an unreadable entry: a base that
// escapes through a symlink is refused, a missing base simply matches
// nothing, and an unreadable directory below it is skipped.
func (w *Workspace) walkError(p, base string, err error) error {
	if isEscape(err) {
		return w.fsError(p, err)
	}
	if p == base && errors.Is(err, iofs.ErrNotExist) {
		return nil
	}
	if p == base {
		return w.fsError(p, err)
	}
	return nil // an unreadable subdirectory: skip it, keep the rest
}
