package upstream

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Bounds of what stderrReason keeps of a server's stderr.
const (
	reasonLines    = 12  // lines in all
	reasonLineSize = 300 // bytes of one line
	reasonLast     = 3   // lines of the end, kept whatever they say
)

// explains marks a line that says what went wrong: the runtimes' and
// package managers' words for a failure.
var explains = regexp.MustCompile(`(?i)error|exception|panic|fatal|traceback|cannot|can't|could not|couldn't|unable|failed|` +
	`not.found|no such|denied|refused|invalid|missing|unknown|unexpected|enoent|eacces|eaddrinuse|permission|killed|timed? ?out`)

// stderrReason is what a server's stderr says about why it stopped or
// never answered, for a log line or an error: the lines that name a
// failure, and the last few lines, in their order, each trimmed to
// reasonLineSize bytes, reasonLines at most (the last ones). The last line
// alone often says nothing: Node.js ends a crash with its version, Go with
// "exit status 2", and the error is lines above it.
func stderrReason(s string) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.TrimRight(line, " \t\r\n"); strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	var keep []string
	for i, line := range lines {
		if i >= len(lines)-reasonLast || explains.MatchString(line) {
			keep = append(keep, clip(strings.TrimSpace(line), reasonLineSize))
		}
	}
	if len(keep) > reasonLines {
		keep = keep[len(keep)-reasonLines:]
	}
	return strings.Join(keep, " | ")
}

// clip cuts s to at most n bytes, at a character boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
