// Command testreport reads `go test -json` as it streams and says what
// the plain `go test` does not while the long packages run: a line per
// package as it ends (its time, its tests, its skips), a line every minute
// naming the packages still running and how far each got, the output of
// every test that failed, and at the end the counts — tests run (subtests
// counted), passed, skipped, failed — and why the skipped ones skipped
// (the `SKIPPED:` lines of the tests whose peers are missing, and the
// others' reasons), grouped. It exits 1 when a test or a package failed.
//
//	go test -race -json ./... | go run ./internal/testreport
//
// With -save it also keeps the run, compacted to what the summary is made
// of (a `go test -json` stream itself; gzipped when the name ends in .gz);
// with -readme it rewrites the README's block between the testreport
// markers from the run — the skip count the README gives is this
// command's, never typed by hand:
//
//	go test -race -json ./... | go run ./internal/testreport -save internal/testreport/testdata/readme-run.json.gz -readme README.md
//	go run ./internal/testreport -in internal/testreport/testdata/readme-run.json.gz -readme README.md
//
// TestReadmeBlock holds README.md's block to what this command renders
// from the committed run. `make skips` runs the first line.
package main

import (
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(os.Stderr, "testreport:", err)
		}
		os.Exit(1)
	}
}

// errFailed is a run in which a test or a package failed.
var errFailed = errors.New("tests failed")

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("testreport", flag.ContinueOnError)
	in := fs.String("in", "", "read this `go test -json` file (gzipped if it ends in .gz) instead of stdin")
	save := fs.String("save", "", "keep the run, compacted, in this file (gzipped if it ends in .gz)")
	readme := fs.String("readme", "", "rewrite this file's testreport block from the run")
	every := fs.Duration("every", time.Minute, "how often to name the packages still running (0: never)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src := stdin
	if *in != "" {
		f, err := openRun(*in)
		if err != nil {
			return err
		}
		defer f.Close()
		src = f
		*every = 0 // a recorded run: nothing is running
	}
	r := newReport(stdout)
	stop := r.heartbeat(*every)
	err := r.read(src)
	stop()
	if err != nil {
		return err
	}
	r.summary()
	if *save != "" {
		if err := writeRun(*save, r.compact()); err != nil {
			return err
		}
	}
	if *readme != "" {
		if err := rewriteReadme(*readme, r.block()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s's testreport block\n", *readme)
	}
	if r.failed() {
		return errFailed
	}
	return nil
}

// openRun opens a recorded run, gunzipping a .gz.
func openRun(name string) (io.ReadCloser, error) {
	f, err := os.Open(name)
	if err != nil || !strings.HasSuffix(name, ".gz") {
		return f, err
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return readCloser{z, f}, nil
}

type readCloser struct {
	io.Reader
	f *os.File
}

func (r readCloser) Close() error { return r.f.Close() }

// writeRun writes a compacted run, gzipped for a .gz name (with no name
// or time in the gzip header: the same run writes the same bytes).
func writeRun(name string, data []byte) error {
	if !strings.HasSuffix(name, ".gz") {
		return os.WriteFile(name, data, 0o644)
	}
	var b strings.Builder
	z, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := z.Write(data); err != nil {
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}
