package fs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func grepTree() map[string]string {
	return map[string]string{
		"a.go":     "package a\n\nfunc Hello() {}\nfunc world() {}\n",
		"b/c.go":   "line1\nline2\nTODO here\nline4\nline5\n",
		"notes.md": "todo: write\n",
		"bin.dat":  "TODO\x00\n",
		"late.txt": "TODO early\n" + strings.Repeat("x\n", 10) + "\xff\n", // binary only at the end
		"big.txt":  "TODO\n" + strings.Repeat("y", 2000),
		".git/x":   "TODO in git\n",
	}
}

func TestGrep(t *testing.T) {
	skipped := grepSkipped{Binary: 2, TooLarge: 1}
	tests := []struct {
		name      string
		args      string
		want      []grepMatch
		searched  int
		truncated bool
	}{
		{name: "plain", args: `{"pattern":"TODO"}`, searched: 3,
			want: []grepMatch{{Path: "b/c.go", Line: 3, Text: "TODO here"}}},
		{name: "case insensitive", args: `{"pattern":"todo","case_insensitive":true}`, searched: 3,
			want: []grepMatch{{Path: "b/c.go", Line: 3, Text: "TODO here"}, {Path: "notes.md", Line: 1, Text: "todo: write"}}},
		{name: "case sensitive by default", args: `{"pattern":"todo"}`, searched: 3,
			want: []grepMatch{{Path: "notes.md", Line: 1, Text: "todo: write"}}},
		{name: "context", args: `{"pattern":"TODO","context":2}`, searched: 3,
			want: []grepMatch{{Path: "b/c.go", Line: 3, Text: "TODO here", Before: []string{"line1", "line2"}, After: []string{"line4", "line5"}}}},
		{name: "context at the edges", args: `{"pattern":"line[15]","context":2,"path_glob":"b/*"}`, searched: 1,
			want: []grepMatch{
				{Path: "b/c.go", Line: 1, Text: "line1", After: []string{"line2", "TODO here"}},
				{Path: "b/c.go", Line: 5, Text: "line5", Before: []string{"TODO here", "line4"}},
			}},
		{name: "overlapping context", args: `{"pattern":"^func","context":1,"path_glob":"**/*.go"}`, searched: 2,
			want: []grepMatch{
				{Path: "a.go", Line: 3, Text: "func Hello() {}", Before: []string{""}, After: []string{"func world() {}"}},
				{Path: "a.go", Line: 4, Text: "func world() {}", Before: []string{"func Hello() {}"}},
			}},
		{name: "cap", args: `{"pattern":"func","max_matches":1}`, truncated: true, searched: 1,
			want: []grepMatch{{Path: "a.go", Line: 3, Text: "func Hello() {}"}}},
		{name: "cap exactly met is not truncated", args: `{"pattern":"func","max_matches":2}`, searched: 3,
			want: []grepMatch{{Path: "a.go", Line: 3, Text: "func Hello() {}"}, {Path: "a.go", Line: 4, Text: "func world() {}"}}},
		{name: "no match", args: `{"pattern":"zzz"}`, searched: 3, want: []grepMatch{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, Options{MaxFileBytes: 1000})
			tw.write(t, grepTree())
			res, err := tw.exec(t, "grep", tc.args)
			mustOK(t, err)
			got := res.(grepResult)
			if diff := cmp.Diff(tc.want, got.Matches); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
			if got.FilesSearched != tc.searched || got.Truncated != tc.truncated {
				t.Errorf("searched %d truncated %v, want %d %v", got.FilesSearched, got.Truncated, tc.searched, tc.truncated)
			}
			if !tc.truncated && !strings.Contains(tc.args, "path_glob") && got.Skipped != skipped {
				t.Errorf("skipped %+v, want %+v", got.Skipped, skipped)
			}
		})
	}
}

func TestGrepServerCapAndLongLines(t *testing.T) {
	tw := newTestWS(t, Options{MaxMatches: 2})
	tw.write(t, map[string]string{"m.txt": "x1\nx2\nx3\n", "min.js": strings.Repeat("ab", 1000) + "\n"})
	res, err := tw.exec(t, "grep", `{"pattern":"x","max_matches":50}`)
	mustOK(t, err)
	if got := res.(grepResult); len(got.Matches) != 2 || !got.Truncated {
		t.Errorf("server cap: %+v", got)
	}
	res, err = tw.exec(t, "grep", `{"pattern":"ab","path_glob":"*.js"}`)
	mustOK(t, err)
	text := res.(grepResult).Matches[0].Text
	if len(text) > maxLineText+40 || !strings.HasSuffix(text, "[... 1500 more bytes]") {
		t.Errorf("long line not clipped: %d bytes, ends %q", len(text), text[len(text)-30:])
	}
}

func TestGrepErrors(t *testing.T) {
	tests := []struct {
		args string
		kind tools.Kind
		code string
	}{
		{`{"pattern":"func("}`, tools.UserError, "invalid_regexp"},
		{`{"pattern":"(?<=x)y"}`, tools.UserError, "invalid_regexp"},
		{`{"pattern":"x","path_glob":"[z"}`, tools.UserError, "invalid_glob"},
		{`{"pattern":"x","path_glob":"../*"}`, tools.SecurityError, "path_escape"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			tw := newTestWS(t, Options{})
			_, err := tw.exec(t, "grep", tc.args)
			te := wantErr(t, err, tc.kind, tc.code)
			if tc.kind == tools.UserError && len(te.Fields) != 1 {
				t.Errorf("fields: %+v", te.Fields)
			}
		})
	}
	t.Run("context out of range", func(t *testing.T) {
		tw := newTestWS(t, Options{})
		_, err := tw.exec(t, "grep", `{"pattern":"x","context":11}`)
		if te, ok := tools.AsError(err); !ok || te.Kind != tools.ValidationError {
			t.Errorf("want validation error, got %v", err)
		}
	})
}

func TestGrepCancelled(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, grepTree())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tw.tool(t, "grep").Execute(ctx, tools.NewCall(json.RawMessage(`{"pattern":"x"}`), "req-1", "test", nil))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("want context.Canceled, got %v", err)
	}
}
