package fs

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/toold/toold/internal/sanitize"
	"github.com/toold/toold/internal/tools"
)

// BenchmarkReadFile4KiB measures read_file on a 4 KiB text file through
// Execute, as the dispatcher calls it (argument decoding and validation
// included).
func BenchmarkReadFile4KiB(b *testing.B) {
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	red := Options{Redactor: func() LineRedactor { return san.NewLineRedactor("grep") }}
	for _, c := range []struct {
		name string
		opts Options
		args string
	}{
		{"plain", Options{}, `{"paths":["f.txt"]}`},
		// As toold serves it: a whole file is read once; a window is read
		// again with its lines masked before they are shown.
		{"redactor", red, `{"paths":["f.txt"]}`},
		{"plain/window", Options{}, `{"paths":["f.txt"],"offset":10}`},
		{"redactor/window", red, `{"paths":["f.txt"],"offset":10}`},
	} {
		b.Run(c.name, func(b *testing.B) { benchReadFile4KiB(b, c.opts, c.args) })
	}
}

func benchReadFile4KiB(b *testing.B, opts Options, args string) {
	tw := newTestWS(b, opts)
	var sb strings.Builder
	for i := 0; sb.Len() < 4096-64; i++ {
		fmt.Fprintf(&sb, "line %04d: the quick brown fox jumps over the lazy dog\n", i)
	}
	content := sb.String() + strings.Repeat("x", 4096-sb.Len()-1) + "\n"
	tw.write(b, map[string]string{"f.txt": content})
	tl := tw.tool(b, "read_file")
	call := tools.NewCall([]byte(args), "req-1", "bench", nil)
	ctx := context.Background()
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := tl.Execute(ctx, call)
		if err != nil {
			b.Fatal(err)
		}
		if res.(readResult).Files[0].SizeBytes != 4096 {
			b.Fatal("wrong size")
		}
	}
}

// BenchmarkBraceBomb lists 100 files with the brace bomb of issue 16 (which
// doublestar's backtracking matcher did not finish) and with "**", side by
// side: the bomb costs what an ordinary pattern costs.
//
//	go test -run '^$' -bench BraceBomb -count 6 ./internal/tools/fs/
func BenchmarkBraceBomb(b *testing.B) {
	tw := newTestWS(b, Options{})
	files := map[string]string{}
	for i := range 100 {
		files[fmt.Sprintf("d%d/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%d.txt", i%10, i)] = "x\n"
	}
	tw.write(b, files)
	tl := tw.tool(b, "list_files")
	for _, bc := range []struct{ name, pattern string }{
		{"bomb", strings.Repeat("{*,*}", 40) + "zz"},
		{"globstar", "**"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			call := tools.NewCall([]byte(`{"patterns":["`+bc.pattern+`"]}`), "req-1", "bench", nil)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tl.Execute(ctx, call); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWriteFileProtection compares write_file of a new 4 KiB file four
// directories deep with the protected-path check (the default) and without
// it (allow_protected, which skips the check), side by side.
func BenchmarkWriteFileProtection(b *testing.B) {
	content := strings.Repeat("x", 4095) + "\n"
	for _, c := range []struct {
		name  string
		allow bool
	}{{"checked", false}, {"unchecked", true}} {
		b.Run(c.name, func(b *testing.B) {
			tw := newTestWS(b, Options{AllowProtected: c.allow, Protected: []Protected{{Pattern: "Makefile", By: "make"}}})
			tw.write(b, map[string]string{"a/b/c/d/keep": ""})
			tl := tw.tool(b, "write_file")
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				args := fmt.Sprintf(`{"path":"a/b/c/d/f%d.txt","content":%q}`, i, content)
				if _, err := tl.Execute(ctx, tools.NewCall([]byte(args), "req-1", "bench", nil)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckProtected is the check alone on that path.
func BenchmarkCheckProtected(b *testing.B) {
	tw := newTestWS(b, Options{Protected: []Protected{{Pattern: "Makefile", By: "make"}}})
	tw.write(b, map[string]string{"a/b/c/d/keep": ""})
	b.ReportAllocs()
	for b.Loop() {
		if err := tw.w.checkProtected("a/b/c/d/f.txt"); err != nil {
			b.Fatal(err)
		}
	}
}
