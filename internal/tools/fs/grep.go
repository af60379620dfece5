package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"regexp"
	"slices"

	"github.com/toold/toold/internal/tools"
)

type grepArgs struct {
	Pattern         string `json:"pattern" desc:"Regular expression in Go RE2 syntax, matched against each line separately, for example \"func \\\\w+Handler\"." validate:"min=1"`
	PathGlob        string `json:"path_glob,omitempty" default:"**" desc:"Only search files matching this glob (doublestar syntax), for example \"**/*.go\"."`
	CaseInsensitive bool   `json:"case_insensitive,omitempty" desc:"Match letters regardless of case."`
	Context         int    `json:"context,omitempty" default:"0" desc:"Lines to return before and after each match (0 to 10)." validate:"omitempty,min=0,max=10"`
	MaxMatches      int    `json:"max_matches,omitempty" desc:"Most matches to return; defaults to, and is capped by, the server's limit (200 unless configured)." validate:"omitempty,min=1"`
}

type grepResult struct {
	Matches       []grepMatch `json:"matches" desc:"Matching lines, by path then line."`
	FilesSearched int         `json:"files_searched" desc:"Text files searched."`
	Skipped       grepSkipped `json:"skipped" desc:"Files matching path_glob that were not searched."`
	Truncated     bool        `json:"truncated" desc:"More lines matched than max_matches; narrow the pattern or path_glob."`
}

type grepMatch struct {
	Path   string   `json:"path" desc:"Relative to the workspace root."`
	Line   int      `json:"line" desc:"1-based line number."`
	Text   string   `json:"text" desc:"The matching line (very long lines are cut)."`
	Before []string `json:"before,omitempty" desc:"Up to context lines before it."`
	After  []string `json:"after,omitempty" desc:"Up to context lines after it."`
}

type grepSkipped struct {
	Binary     int `json:"binary" desc:"Binary files (NUL bytes or invalid UTF-8)."`
	TooLarge   int `json:"too_large" desc:"Files over the size limit."`
	Unreadable int `json:"unreadable" desc:"Files the server may not read."`
}

// maxLineText bounds each line grep returns: one match in minified code
// must not fill the model's context.
const maxLineText = 500

func (w *Workspace) grepTool() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:     "grep",
		Title:    "Search file contents",
		Category: tools.Direct,
		Effects:  tools.Effects{ReadOnly: true, Idempotent: true},
		Description: "Search the contents of text files in the workspace with a regular expression " +
			"and return matching lines with their line numbers.",
		Instructions: "Use grep to find where something is defined or used when you do not know which file " +
			"holds it, instead of reading files one by one. The pattern is Go RE2 syntax and matches within a " +
			"single line (^ and $ anchor to the line); escape ( ) [ ] { } . * + ? | \\ to match them literally. " +
			"Narrow the search with path_glob (\"**/*.go\"). Ask for context lines to see the surroundings, " +
			"then read_file with offset for more. Binary files, files over the size limit, symbolic links and " +
			".git directories are not searched. Secrets in files are masked before matching, as they are in " +
			"the result: search for \"REDACTED:\" to find where they are.",
		Returns: "matches: path, line, text, and before/after context lines; files_searched; skipped counts " +
			"(binary, too_large, unreadable); truncated is true when more lines matched than were returned.",
		Examples: []tools.Example{
			{Description: "find a function's definition in Go files", Arguments: []byte(`{"pattern":"func \\w+Handler\\(","path_glob":"**/*.go"}`)},
			{Description: "case-insensitive search with context", Arguments: []byte(`{"pattern":"todo|fixme","case_insensitive":true,"context":2,"max_matches":50}`)},
		},
	}, w.grep)
}

func (w *Workspace) grep(ctx context.Context, call *tools.Call, in grepArgs) (grepResult, error) {
	re, err := compileRegexp(in.Pattern, in.CaseInsensitive)
	if err != nil {
		return grepResult{}, err
	}
	glob := in.PathGlob
	if glob == "" {
		glob = "**"
	}
	g, err := compileGlobs([]string{glob}, "/path_glob")
	if err != nil {
		return grepResult{}, err
	}
	limit := w.opts.MaxMatches
	if in.MaxMatches > 0 {
		limit = min(in.MaxMatches, limit)
	}
	res := grepResult{Matches: []grepMatch{}}
	stop := errors.New("enough matches") // ends the walk early; local, compared by identity
	err = w.walk(ctx, g, func(p string, d iofs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil
		}
		s := &fileSearch{ctx: ctx, re: re, path: p, context: min(max(in.Context, 0), 10), room: limit - len(res.Matches)}
		s.lines = redactedLines{keep: s.line}
		if w.opts.Redactor != nil {
			s.lines.red = w.opts.Redactor()
		}
		if err := w.searchFile(s, &res); err != nil {
			return err
		}
		if s.more {
			res.Truncated = true
			return stop
		}
		return nil
	})
	if err != nil && err != stop {
		return grepResult{}, err
	}
	if w.opts.Redactor != nil {
		for _, m := range res.Matches {
			countMarkers(call, m.Text)
			countMarkers(call, m.Before...)
			countMarkers(call, m.After...)
		}
	}
	return res, nil
}

func compileRegexp(pattern string, fold bool) (*regexp.Regexp, error) {
	if fold {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		e := tools.NewUserError("the pattern is not a valid RE2 regular expression: %v", err).WithCode(tools.CodeInvalidRegexp).
			WithSuggestion("escape ( ) [ ] { } . * + ? | \\ with a backslash to match them literally; RE2 has no lookaround or backreferences")
		e.Fields = []tools.FieldError{{Pointer: "/pattern", Message: err.Error()}}
		return nil, e
	}
	return re, nil
}

// searchFile greps one file into res, counting it as searched or skipped.
// Its matches are committed only if the whole scanned part is text, so a
// file found to be binary halfway contributes nothing.
func (w *Workspace) searchFile(s *fileSearch, res *grepResult) error {
	f, info, err := w.openRegular(s.path)
	if err != nil {
		if te, ok := tools.AsError(err); ok && te.Kind != tools.SecurityError {
			res.Skipped.Unreadable++ // vanished or not permitted since the walk saw it
			return nil
		}
		return err
	}
	defer f.Close()
	if info.Size() > w.opts.MaxFileBytes {
		res.Skipped.TooLarge++
		return nil
	}
	lr := &io.LimitedReader{R: f, N: w.opts.MaxFileBytes + 1}
	_, err = scanLines(lr, bufSize(info.Size()), s.lines.add)
	if err == nil {
		s.lines.flush()
	}
	if s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	switch {
	case errors.Is(err, errBinary):
		res.Skipped.Binary++
		s.more = false // its matches are dropped, so they cannot truncate anything
		return nil
	case err != nil:
		return fmt.Errorf("grep %s: %w", s.path, err)
	case lr.N == 0: // grew past the limit after fstat
		res.Skipped.TooLarge++
		s.more = false
		return nil
	}
	res.FilesSearched++
	res.Matches = append(res.Matches, s.matches...)
	return nil
}

// ctxEvery is how many lines grep scans between looks at its context.
const ctxEvery = 1024

// fileSearch is the state of grepping one file: a window of lines for
// "before" context and the matches still collecting "after" lines.
type fileSearch struct {
	ctx     context.Context // checked every ctxEvery lines: a large file is no excuse to outlive the call
	re      *regexp.Regexp
	lines   redactedLines // feeds line, masked first when there is a redactor
	path    string
	context int
	room    int // matches this file may still add
	matches []grepMatch
	before  []string
	pending []int // indexes into matches still short of after-lines
	more    bool  // a match beyond room was seen: the result is truncated
}

// line searches one line. After room is used up it only looks for one
// more match (to report truncation honestly) and finishes pending
// after-context, then stops.
func (s *fileSearch) line(n int, line []byte) bool {
	if n%ctxEvery == 0 && s.ctx.Err() != nil {
		return false
	}
	var text string
	if s.context > 0 {
		text = clipLine(line)
		kept := s.pending[:0]
		for _, i := range s.pending {
			s.matches[i].After = append(s.matches[i].After, text)
			if len(s.matches[i].After) < s.context {
				kept = append(kept, i)
			}
		}
		s.pending = kept
	}
	if !s.more && s.re.Match(line) {
		if len(s.matches) >= s.room {
			s.more = true
		} else {
			m := grepMatch{Path: s.path, Line: n, Text: clipLine(line), Before: slices.Clone(s.before)}
			s.matches = append(s.matches, m)
			if s.context > 0 {
				s.pending = append(s.pending, len(s.matches)-1)
			}
		}
	}
	if s.context > 0 {
		if len(s.before) == s.context {
			s.before = s.before[1:]
		}
		s.before = append(s.before, text)
	}
	return !s.more || len(s.pending) > 0
}

func clipLine(line []byte) string {
	if len(line) <= maxLineText {
		return string(line)
	}
	cut := tools.CutUTF8(line, maxLineText)
	return fmt.Sprintf("%s [... %d more bytes]", cut, len(line)-len(cut))
}
