package fs

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toold/toold/internal/tools"
)

func TestResolvePath(t *testing.T) {
	tests := []struct {
		in, want string
		kind     tools.Kind
		code     string
	}{
		{in: "a.txt", want: "a.txt"},
		{in: "./a/b/../c.txt", want: "a/c.txt"},
		{in: "a//b/", want: "a/b"},
		{in: ".", want: "."},
		{in: "a/..", want: "."},
		{in: "..a/b", want: "..a/b"},
		{in: "~/x", want: "~/x"},
		{in: strings.Repeat("b", 255), want: strings.Repeat("b", 255)},
		{in: "", kind: tools.UserError, code: "empty_path"},
		{in: "..", kind: tools.SecurityError, code: "path_escape"},
		{in: "../x", kind: tools.SecurityError, code: "path_escape"},
		{in: "a/../../x", kind: tools.SecurityError, code: "path_escape"},
		{in: "./../x", kind: tools.SecurityError, code: "path_escape"},
		{in: "/etc/passwd", kind: tools.SecurityError, code: "absolute_path"},
		{in: "//host/share", kind: tools.SecurityError, code: "absolute_path"},
		{in: "a\x00b", kind: tools.SecurityError, code: "nul_byte"},
		{in: strings.Repeat("a/", 2500), kind: tools.SecurityError, code: "path_too_long"},
		{in: "d/" + strings.Repeat("b", 256), kind: tools.SecurityError, code: "path_too_long"},
	}
	for _, tc := range tests {
		name := tc.in
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			got, err := resolvePath(tc.in)
			if tc.kind == "" {
				mustOK(t, err)
				if got != tc.want {
					t.Errorf("resolvePath(%q) = %q, want %q", tc.in, got, tc.want)
				}
				return
			}
			te := wantErr(t, err, tc.kind, tc.code)
			if len(te.Message) > 300 {
				t.Errorf("message is %d bytes; hostile paths must be shortened", len(te.Message))
			}
		})
	}
}

// FuzzResolvePath: whatever it accepts is local, clean, free of NUL and
// within the length limits; it never panics.
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"a", "../x", "/etc/passwd", "a/../../x", "./../x", "a\x00b", "a/./b//c/",
		".", "..", "...", "a/..", strings.Repeat("x/", 300), "é/ü", "\\..\\x", "C:\\x", "a/\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := resolvePath(p)
		if err != nil {
			if _, ok := tools.AsError(err); !ok {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch {
		case !filepath.IsLocal(got):
			t.Fatalf("resolvePath(%q) = %q, which is not local", p, got)
		case strings.ContainsRune(got, 0):
			t.Fatalf("resolvePath(%q) = %q contains NUL", p, got)
		case len(got) > maxPathBytes:
			t.Fatalf("resolvePath(%q) is too long", p)
		case filepath.ToSlash(filepath.Clean(got)) != got:
			t.Fatalf("resolvePath(%q) = %q is not clean", p, got)
		}
		for _, c := range strings.Split(got, "/") {
			if len(c) > maxComponentBytes || c == ".." {
				t.Fatalf("resolvePath(%q) = %q has component %q", p, got, c)
			}
		}
	})
}
