package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"regexp"
	"slices"
	"strings"

	"github.com/toold/toold/internal/tools"
)

// globSet is a validated set of glob patterns, compiled together into one
// linear-time matcher (glob.go), and the directories a walk must start from
// to find everything they can match.
type globSet struct {
	re      *regexp.Regexp
	bases   []string // disjoint subtrees, in walk order
	withGit bool     // a pattern names .git, so .git directories are walked
}

// namesGit spots ".git" as a whole path component or brace alternative, so
// "**/.gitignore" does not count as asking for .git directories.
var namesGit = regexp.MustCompile(`(^|[/{,])\.git($|[/},])`)

// compileGlobs checks each pattern like a path (no NUL, not absolute, no
// climbing out) and as a glob, pointing the model at the faulty one.
func compileGlobs(patterns []string, field string) (*globSet, error) {
	g := &globSet{}
	bodies := make([]string, 0, len(patterns))
	for i, p := range patterns {
		ptr := field
		if len(patterns) > 1 || field == "/patterns" {
			ptr = fmt.Sprintf("%s/%d", field, i)
		}
		clean, err := resolvePath(p)
		if err != nil {
			return nil, err
		}
		body, err := globRegexp(clean)
		if err != nil {
			ge := err.(*globError)
			e := tools.NewUserError("%s is not a valid glob pattern: %s", show(p), ge.msg).WithCode(tools.CodeInvalidGlob).
				WithSuggestion("%s; the syntax: * within a name, ** across directories, {a,b} alternatives, [abc] classes, for example \"src/**/*.{go,md}\"", ge.hint)
			e.Fields = []tools.FieldError{{Pointer: ptr, Message: ge.msg}}
			return nil, e
		}
		bodies = append(bodies, body)
		g.bases = append(g.bases, globBase(clean))
		g.withGit = g.withGit || namesGit.MatchString(clean)
	}
	// Each body is at most maxGlobBytes of pattern, so the expression is
	// small; RE2 matches it in time linear in the path. (?s): a name may
	// hold a line break, which "**" (.*) must match like any byte.
	g.re = regexp.MustCompile(`(?s)^(?:` + strings.Join(bodies, "|") + `)$`)
	g.bases = disjointBases(g.bases)
	return g, nil
}

// globBase is the directory a pattern's matches all lie under: its leading
// components that hold no glob syntax ("." when the first one does).
func globBase(pat string) string {
	end := strings.IndexAny(pat, `*?[{\`)
	if end < 0 {
		end = len(pat)
	}
	if end == len(pat) {
		// No syntax at all: the pattern names one entry, found from its
		// parent.
		end = strings.LastIndexByte(pat, '/')
	} else {
		end = strings.LastIndexByte(pat[:end], '/')
	}
	if end <= 0 {
		return "."
	}
	return pat[:end]
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

func (g *globSet) match(p string) bool { return g.re.MatchString(p) }

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
