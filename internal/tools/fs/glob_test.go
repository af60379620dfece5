package fs

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/toold/toold/internal/tools"
	"path"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

func mustGlob(t testing.TB, pats ...string) *globSet {
	t.Helper()
	g, err := compileGlobs(pats, "/patterns")
	if err != nil {
		t.Fatalf("compileGlobs(%q): %v", pats, err)
	}
	return g
}

func TestGlobMatches(t *testing.T) {
	tests := []struct {
		pat string
		yes []string
		no  []string
	}{
		{"**", []string{"a", "a/b", ".git/config", "x/.h", "a\nb/c"}, nil},
		{"*", []string{"a", ".h"}, []string{"a/b"}},
		{"*.go", []string{"main.go"}, []string{"cmd/main.go", "main.goo"}},
		{"**/*.go", []string{"main.go", "cmd/main.go", "a/b/c.go"}, []string{"main.g"}},
		{"a/**", []string{"a", "a/b", "a/b/c"}, []string{"ab", "b/a"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"a/xb", "b"}},
		{"a**b", []string{"ab", "axb"}, []string{"ax/b"}},
		{"a/**b", []string{"a/b", "a/xb"}, []string{"a/c/b"}},
		{"**x", []string{"x", "ax"}, []string{"a/x"}},
		{"?.md", []string{"a.md"}, []string{"ab.md", "/.md"}},
		{"[a-c]x", []string{"ax", "cx"}, []string{"dx"}},
		{"[!a]x", []string{"bx"}, []string{"ax", "/x"}},
		{"[^a]x", []string{"bx"}, []string{"ax"}},
		{"src/*.{go,md}", []string{"src/a.go", "src/b.md"}, []string{"src/c.txt", "src/x/a.go"}},
		{"{a,b/c}/d", []string{"a/d", "b/c/d"}, []string{"b/d"}},
		{"{**/,}x", []string{"x", "q/x", "q/r/x"}, []string{"qx"}},
		{"{a,**}/x", []string{"a/x", "q/r/x"}, nil},
		{"{a/**,b}", []string{"a", "a/z", "b"}, []string{"c"}},
		// "P/**" matches what P matches, also when P ends in a "*" that
		// matches nothing (doublestar's matcher does not: see dirItself).
		{"a*/**", []string{"a", "ab", "ab/c"}, []string{"b"}},
		// "**" is a whole component only where the group ends one.
		{"{**}x", []string{"x", "ax"}, []string{"0/x"}},
		{"a{**,b}/x", []string{"a/x", "ab/x", "aq/x"}, []string{"a/q/x"}},
		{"{**}/*", []string{"0", "a/b"}, nil},
		{"{a,{**,c}}/x", []string{"a/x", "x", "q/r/x", "c/x"}, []string{"ax"}},
		{`a\*b`, []string{"a*b"}, []string{"axb"}},
		{"a.b+c(d)", []string{"a.b+c(d)"}, []string{"axb+c(d)"}},
		{"日本/*", []string{"日本/語"}, []string{"日本語"}},
	}
	for _, tt := range tests {
		g := mustGlob(t, tt.pat)
		for _, p := range tt.yes {
			if !g.match(p) {
				t.Errorf("%q does not match %q", tt.pat, p)
			}
		}
		for _, p := range tt.no {
			if g.match(p) {
				t.Errorf("%q matches %q", tt.pat, p)
			}
		}
	}
}

// A pattern that makes a backtracking matcher take exponential time is
// matched at once: a 200-byte brace bomb pinned a tool until restart.
func TestBraceBombIsLinear(t *testing.T) {
	bomb := strings.Repeat("{*,*}", 40) + "zz"
	g := mustGlob(t, bomb)
	start := time.Now()
	for range 1000 {
		if g.match("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
			t.Fatal("the bomb matched a name without zz")
		}
	}
	// Generous: linear matching takes well under a millisecond per call;
	// the backtracking matcher did not finish in minutes.
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("1000 matches of the brace bomb took %v", d)
	}
	if !g.match("azz") {
		t.Fatal("the bomb does not match azz")
	}
}

func TestBadGlobs(t *testing.T) {
	tests := []struct{ pat, want string }{
		{"***", `"***"`},
		{"a/{}", "empty braces"},
		{"a/{b", "without its }"},
		{"a}", "without its {"},
		{"a/[b/c]", "holds /"},
		{"[]", "empty class"},
		{"[abc", "without its ]"},
		{"[z-a]", "runs backwards"},
		{`a\`, "lone backslash"},
		{strings.Repeat("{", 11) + "a" + strings.Repeat("}", 11), "more than 10 deep"},
		{strings.Repeat(strings.Repeat("a", 200)+"/", 6) + "b", "limit is 1024"},
	}
	for _, tt := range tests {
		_, err := compileGlobs([]string{tt.pat}, "/path_glob")
		if err == nil {
			t.Errorf("%q was accepted", tt.pat)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %q does not say %q", tt.pat, err, tt.want)
		}
	}
}

func TestGlobBase(t *testing.T) {
	tests := []struct{ pat, want string }{
		{"**", "."},
		{"a/b/*.go", "a/b"},
		{"a/b.go", "a"},
		{"a", "."},
		{"a/{b,c}/d", "a"},
		{`a/b\*`, "a"},
		{"a/b/[xy]", "a/b"},
	}
	for _, tt := range tests {
		if got := globBase(tt.pat); got != tt.want {
			t.Errorf("globBase(%q) = %q, want %q", tt.pat, got, tt.want)
		}
	}
}

// FuzzGlobAgainstDoublestar holds the compiled matcher to doublestar, the
// syntax the tools document, on patterns small enough for doublestar's
// backtracking to finish. The patterns toold refuses (globError) are not
// compared; neither are paths that are not clean and relative, which the
// walk never produces.
func FuzzGlobAgainstDoublestar(f *testing.F) {
	for _, s := range [][2]string{
		{"**/*.go", "a/b.go"}, {"a/**", "a"}, {"{a,b}/c", "b/c"}, {"[!a]?", "bc"},
		{"a**b", "ax/b"}, {"{**/,}x", "q/x"}, {`a\*`, "a*"}, {"x/**/y", "x/y"},
		{"{a,{b,c}}/*", "c/d"}, {"*.{go,md}", "r.md"}, {"[a-]x", "-x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, name string) {
		if len(pat) > 64 || strings.Count(pat, "{") > 3 || strings.Count(pat, "*") > 8 {
			return // doublestar's own time would blow up
		}
		if !utf8.ValidString(pat) || !utf8.ValidString(name) || name == "" ||
			path.Clean(name) != name || path.IsAbs(name) || strings.HasPrefix(name, "..") ||
			path.Clean(pat) != pat || strings.HasPrefix(pat, "/") {
			return
		}
		g, err := compileGlobs([]string{pat}, "/path_glob")
		if err != nil {
			return // refused with a clear error: TestBadGlobs checks those
		}
		if !doublestar.ValidatePattern(pat) {
			t.Fatalf("%q: accepted by toold, invalid for doublestar", pat)
		}
		if starsMeetBraces(pat) {
			return // doublestar's reading is quirky there: TestGlobMatches holds those
		}
		got, want := g.match(name), doublestar.MatchUnvalidated(pat, name)
		if got && !want && doublestar.MatchUnvalidated(dirItself(pat), name) {
			want = true // doublestar's quirk: "a*/**" does not match "a", where "a/**" does
		}
		if got != want {
			t.Fatalf("pattern %q, name %q: toold %v, doublestar %v", pat, name, got, want)
		}
	})
}

// starsMeetBraces reports a "*" inside a brace group or next to one.
// There doublestar reads patterns in ways toold does not copy — "{*}*/*"
// matches "0" (the two stars read as "**"), "{0*{*}}" does not match
// "0" — so the fuzz target leaves such patterns to TestGlobMatches, which
// states toold's reading of them.
func starsMeetBraces(pat string) bool {
	depth := 0
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '\\':
			i++
		case c == '{':
			depth++
			if i > 0 && pat[i-1] == '*' {
				return true
			}
		case c == '}':
			depth--
			if i+1 < len(pat) && pat[i+1] == '*' {
				return true
			}
		case c == '*' && depth > 0:
			return true
		}
	}
	return false
}

// dirItself is pat with each "/**" that closes it or one of its
// alternatives removed. toold lets "P/**" match whatever P matches (the
// directory itself), as doublestar does for "a/**" and "a"; doublestar
// does not when P ends in a "*" that matches nothing ("a*/**" and "a",
// "a/b*/**" and "a/b"), which the fuzz target found. toold keeps the one
// rule.
func dirItself(pat string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '\\' && i+1 < len(pat):
			b.WriteString(pat[i : i+2])
			i++
			continue
		case c == '{':
			depth++
		case c == '}':
			depth--
		case strings.HasPrefix(pat[i:], "/**"):
			if j := i + 3; j == len(pat) || (depth > 0 && (pat[j] == ',' || pat[j] == '}') && groupEndsComponent(pat, j)) {
				i = j - 1
				continue
			}
		}
		b.WriteByte(pat[i])
	}
	return b.String()
}

// countdownCtx reports itself cancelled after n looks at Err, so a test can
// cancel a call in the middle of one file.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// grep looks at its context inside a file too, not only between files: a
// large file cannot keep a cancelled call running.
func TestGrepChecksItsContext(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"big.txt": strings.Repeat("no match here\n", 200_000)})
	tl := tw.tool(t, "grep")
	ctx := &countdownCtx{Context: context.Background()}
	ctx.n.Store(5) // the walk's looks, then a few inside the file
	_, err := tl.Execute(ctx, tools.NewCall([]byte(`{"pattern":"zzz"}`), "req-1", "test", nil))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("grep of a cancelled call: %v, want context.Canceled", err)
	}
}
