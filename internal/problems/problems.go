// Package problems collects what is wrong with one section of toold's
// configuration, each problem at its path within the section, so that
// toold's wiring reports every problem at once under the section's own
// path ("http.tools[2]: ...", "consult.providers.gemini.output: ...").
package problems

import (
	"fmt"
	"slices"
	"strings"
)

// Problem is one setting and what is wrong with it.
type Problem struct {
	Path    string
	Message string
}

// List is an error listing a section's problems.
type List struct {
	// Section prefixes every path in Error ("http", "consult").
	Section  string
	Problems []Problem
}

// Add records a problem at path.
func (l *List) Add(path, format string, args ...any) {
	l.Problems = append(l.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Error is one line a problem: "section.path: message".
func (l *List) Error() string {
	lines := make([]string, len(l.Problems))
	for i, p := range l.Problems {
		lines[i] = l.Section + "." + p.Path + ": " + p.Message
	}
	return strings.Join(lines, "\n")
}

// EachProblem calls f with each problem's path (in the section) and
// message, for toold's wiring to report them under the section.
func (l *List) EachProblem(f func(path, message string)) {
	for _, p := range l.Problems {
		f(p.Path, p.Message)
	}
}

// Err is the list, its problems sorted by path, or nil when it holds
// none.
func (l *List) Err() error {
	if len(l.Problems) == 0 {
		return nil
	}
	slices.SortStableFunc(l.Problems, func(a, b Problem) int { return strings.Compare(a.Path, b.Path) })
	return l
}
