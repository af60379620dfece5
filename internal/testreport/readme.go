package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"
)

// The README's block: between these two lines, written by -readme.
const (
	blockStart = "<!-- testreport: written by `go run ./internal/testreport -readme README.md` from a recorded `go test -race -json ./...` run; do not edit by hand -->"
	blockEnd   = "<!-- /testreport -->"
)

// block renders the run for the README: how many tests skip of how many,
// when the run was and how long it took, its slowest packages, and the
// skips by reason.
func (r *report) block() string {
	var b strings.Builder
	b.WriteString(blockStart + "\n")
	fmt.Fprintf(&b, "**%d tests skip** of %s (subtests counted) in %s: %s passed, %s failed, in a run of %s (wall clock) on %s.",
		len(r.skips), thousands(r.tests), plural(r.packages(), "package"), thousands(r.passed), thousands(r.failedTests),
		r.last.Sub(r.first).Round(time.Second), r.first.UTC().Format("2006-01-02"))
	var slow []string
	for _, p := range r.slowest(5) {
		slow = append(slow, fmt.Sprintf("`%s` %s", short(p.name), p.elapsed.Round(time.Second)))
	}
	if len(slow) > 0 {
		fmt.Fprintf(&b, " The slowest packages: %s.", strings.Join(slow, ", "))
	}
	b.WriteString("\n")
	if len(r.skips) > 0 {
		b.WriteString("\n| tests | why they skip |\n|---:|---|\n")
		for _, rc := range r.reasons() {
			fmt.Fprintf(&b, "| %d | %s |\n", rc.n, cell.Replace(rc.why))
		}
	}
	b.WriteString(blockEnd + "\n")
	return b.String()
}

// cell escapes a reason for a Markdown table's cell: a | would end the
// cell, a < could open an HTML comment (and end the block early).
var cell = strings.NewReplacer("|", `\|`, "<", "&lt;")

// readmeBlock finds the block in a README: the text from its start line
// through its end line; ok false without both, in order.
func readmeBlock(text []byte) (start, end int, ok bool) {
	prefix := blockStart[:strings.Index(blockStart, ":")]
	start = bytes.Index(text, []byte(prefix))
	if start < 0 || (start > 0 && text[start-1] != '\n') {
		return 0, 0, false
	}
	i := bytes.Index(text[start:], []byte(blockEnd))
	if i < 0 {
		return 0, 0, false
	}
	end = start + i + len(blockEnd)
	if end < len(text) && text[end] == '\n' {
		end++
	}
	return start, end, true
}

// rewriteReadme replaces the file's block with block.
func rewriteReadme(name, block string) error {
	text, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	start, end, ok := readmeBlock(text)
	if !ok {
		return fmt.Errorf("%s has no testreport block: put the lines %q and %q where the skip count goes", name,
			blockStart, blockEnd)
	}
	out := append(append(append([]byte{}, text[:start]...), block...), text[end:]...)
	return os.WriteFile(name, out, 0o644)
}
