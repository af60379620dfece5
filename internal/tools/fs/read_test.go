package fs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/toold/toold/internal/tools"
)

func TestReadFile(t *testing.T) {
	ten := ""
	for i := 1; i <= 10; i++ {
		ten += fmt.Sprintf("line %d\n", i)
	}
	files := map[string]string{
		"a.txt":        "alpha\nbeta\n",
		"noeol.txt":    "alpha\nbeta",
		"crlf.txt":     "x\r\ny\r\n",
		"ten.txt":      ten,
		"empty.txt":    "",
		"dir/deep.txt": "deep\n",
	}
	tests := []struct {
		name string
		opts Options
		args string
		want fileContent
	}{
		{name: "whole file", args: `{"paths":["a.txt"]}`, want: fileContent{
			Path: "a.txt", Content: "     1\talpha\n     2\tbeta\n", StartLine: 1, EndLine: 2, TotalLines: 2,
			SizeBytes: 11, SHA256: sum(files["a.txt"]), TokenEstimate: 7}},
		{name: "unclean path", args: `{"paths":["./dir/../dir/deep.txt"]}`, want: fileContent{
			Path: "dir/deep.txt", Content: "     1\tdeep\n", StartLine: 1, EndLine: 1, TotalLines: 1,
			SizeBytes: 5, SHA256: sum("deep\n"), TokenEstimate: 3}},
		{name: "no final newline", args: `{"paths":["noeol.txt"]}`, want: fileContent{
			Path: "noeol.txt", Content: "     1\talpha\n     2\tbeta\n", StartLine: 1, EndLine: 2, TotalLines: 2,
			SizeBytes: 10, SHA256: sum(files["noeol.txt"]), TokenEstimate: 7}},
		{name: "carriage returns kept", args: `{"paths":["crlf.txt"]}`, want: fileContent{
			Path: "crlf.txt", Content: "     1\tx\r\n     2\ty\r\n", StartLine: 1, EndLine: 2, TotalLines: 2,
			SizeBytes: 6, SHA256: sum(files["crlf.txt"]), TokenEstimate: 5}},
		{name: "offset and limit", args: `{"paths":["ten.txt"],"offset":3,"limit":2}`, want: fileContent{
			Path: "ten.txt", Content: "     3\tline 3\n     4\tline 4\n", StartLine: 3, EndLine: 4, TotalLines: 10,
			Truncated: true, Note: "showing lines 3-4 of 10; to read on, call read_file with offset 5",
			SizeBytes: int64(len(ten)), SHA256: sum(ten), TokenEstimate: 7}},
		{name: "limit reaching the end is not truncated", args: `{"paths":["ten.txt"],"offset":9,"limit":2}`, want: fileContent{
			Path: "ten.txt", Content: "     9\tline 9\n    10\tline 10\n", StartLine: 9, EndLine: 10, TotalLines: 10,
			SizeBytes: int64(len(ten)), SHA256: sum(ten), TokenEstimate: 8}},
		{name: "offset past the end", args: `{"paths":["ten.txt"],"offset":50}`, want: fileContent{
			Path: "ten.txt", TotalLines: 10, Note: "offset 50 is past the end: the file has 10 lines",
			SizeBytes: int64(len(ten)), SHA256: sum(ten)}},
		{name: "empty file", args: `{"paths":["empty.txt"]}`, want: fileContent{
			Path: "empty.txt", Note: "the file is empty", SHA256: sum("")}},
		{name: "byte cap keeps whole lines and hashes the whole file", opts: Options{MaxReadBytes: 40},
			args: `{"paths":["ten.txt"]}`, want: fileContent{
				Path: "ten.txt", Content: "     1\tline 1\n     2\tline 2\n", StartLine: 1, EndLine: 2, TotalLines: 10,
				Truncated: true, Note: "showing lines 1-2 of 10; to read on, call read_file with offset 3",
				SizeBytes: int64(len(ten)), SHA256: sum(ten), TokenEstimate: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, tc.opts)
			tw.write(t, files)
			res, err := tw.exec(t, "read_file", tc.args)
			mustOK(t, err)
			got := res.(readResult)
			want := readResult{Files: []fileContent{tc.want}, FilesRead: 1, TokenEstimate: tc.want.TokenEstimate}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadFileLongLine(t *testing.T) {
	tw := newTestWS(t, Options{MaxReadBytes: 64})
	long := strings.Repeat("é", 100) // 200 bytes, two per rune: the cut must not split one
	tw.write(t, map[string]string{"min.js": long + "\nnext\n"})
	res, err := tw.exec(t, "read_file", `{"paths":["min.js"]}`)
	mustOK(t, err)
	c := res.(readResult).Files[0]
	if !c.Truncated || c.StartLine != 1 || c.EndLine != 1 || len(c.Content) > 64 || !strings.HasPrefix(c.Content, "     1\té") {
		t.Errorf("got %+v", c)
	}
	if !strings.Contains(c.Note, "line 1 is 200 bytes") || c.SHA256 != sum(long+"\nnext\n") {
		t.Errorf("note %q, sha %s", c.Note, c.SHA256)
	}
}

func TestReadFileSeveralPaths(t *testing.T) {
	tw := newTestWS(t, Options{})
	tw.write(t, map[string]string{"README.md": "hi\n", "b.txt": "b\n", "bin.dat": "a\x00b"})
	res, err := tw.exec(t, "read_file", `{"paths":["README.md","readme.txt","b.txt","bin.dat","README.md"]}`)
	mustOK(t, err)
	got := res.(readResult)
	var paths []string
	for _, f := range got.Files {
		paths = append(paths, f.Path)
	}
	if diff := cmp.Diff([]string{"README.md", "b.txt"}, paths); diff != "" {
		t.Errorf("files read (-want +got):\n%s", diff)
	}
	if got.FilesRead != 2 || got.TokenEstimate != got.Files[0].TokenEstimate+got.Files[1].TokenEstimate {
		t.Errorf("totals: %+v", got)
	}
	if len(got.Errors) != 2 || got.Errors[0].Code != "not_found" || got.Errors[1].Code != "binary_file" ||
		got.Errors[0].Type != tools.UserError {
		t.Fatalf("errors: %+v", got.Errors)
	}
	if !strings.Contains(got.Errors[0].Suggestion, `"README.md"`) {
		t.Errorf("suggestion should offer the nearest name: %q", got.Errors[0].Suggestion)
	}
}

func TestReadFileErrors(t *testing.T) {
	tests := []struct {
		name, args string
		opts       Options
		kind       tools.Kind
		code       string
		inMessage  string
	}{
		{name: "missing", args: `{"paths":["nope.txt"]}`, kind: tools.UserError, code: "not_found"},
		{name: "missing dir", args: `{"paths":["no/such/dir.txt"]}`, kind: tools.UserError, code: "not_found"},
		{name: "parent is a file", args: `{"paths":["text.txt/x"]}`, kind: tools.UserError, code: "not_found"},
		{name: "all missing", args: `{"paths":["x1","x2"]}`, kind: tools.UserError, code: "not_found", inMessage: `"x2"`},
		{name: "NUL byte early", args: `{"paths":["nul.bin"]}`, kind: tools.UserError, code: "binary_file"},
		{name: "invalid UTF-8", args: `{"paths":["latin1.txt"]}`, kind: tools.UserError, code: "binary_file"},
		{name: "directory", args: `{"paths":["sub"]}`, kind: tools.UserError, code: "is_directory", inMessage: "directory"},
		{name: "workspace root", args: `{"paths":["."]}`, kind: tools.UserError, code: "is_directory"},
		{name: "too large", args: `{"paths":["text.txt"]}`, opts: Options{MaxFileBytes: 4}, kind: tools.UserError, code: "file_too_large"},
		{name: "empty path", args: `{"paths":[""]}`, kind: tools.ValidationError},
		{name: "no paths", args: `{"paths":[]}`, kind: tools.ValidationError},
		{name: "unknown argument", args: `{"paths":["a"],"lines":3}`, kind: tools.ValidationError},
		{name: "too many paths", args: `{"paths":[` + strings.Repeat(`"a",`, 20) + `"a"]}`, kind: tools.ValidationError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTestWS(t, tc.opts)
			tw.write(t, map[string]string{"text.txt": "hello\n", "nul.bin": "ab\x00cd\n", "latin1.txt": "caf\xe9\n", "sub/x": "x"})
			_, err := tw.exec(t, "read_file", tc.args)
			if tc.kind == tools.ValidationError {
				if te, ok := tools.AsError(err); !ok || te.Kind != tools.ValidationError {
					t.Fatalf("want validation error, got %v", err)
				}
				return
			}
			te := wantErr(t, err, tc.kind, tc.code)
			if !strings.Contains(te.Message, tc.inMessage) {
				t.Errorf("message %q lacks %q", te.Message, tc.inMessage)
			}
		})
	}
}

// TestReadTotalBudget: one call returns at most MaxTotalReadBytes over all
// its files; files past the budget are reported, not silently dropped.
func TestReadTotalBudget(t *testing.T) {
	tw := newTestWS(t, Options{MaxReadBytes: 100, MaxTotalReadBytes: 150})
	line := strings.Repeat("x", 40) + "\n"
	tw.write(t, map[string]string{"a.txt": line + line, "b.txt": line + line, "c.txt": line})
	out, err := tw.exec(t, "read_file", `{"paths":["a.txt","b.txt","c.txt"]}`)
	mustOK(t, err)
	res := out.(readResult)
	total := 0
	for _, f := range res.Files {
		total += len(f.Content)
	}
	if total > 150 {
		t.Errorf("returned %d bytes over a 150-byte budget", total)
	}
	if len(res.Errors) == 0 || res.Errors[len(res.Errors)-1].Code != "read_budget" {
		t.Errorf("files past the budget not reported: %+v", res.Errors)
	}
}
