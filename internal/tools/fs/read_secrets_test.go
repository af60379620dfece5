package fs

import (
	"strings"
	"testing"

	"github.com/toold/toold/internal/sanitize"
)

// TestReadFileSeesRedactedLines: read_file returns what the sanitizer
// leaves of a file read whole, however the read is cut: a window that
// starts inside a private key block shows no line of its body (the output
// sanitizer alone sees no header there), and a huge line cut at the read
// cap keeps no piece of a token too short to recognize.
func TestReadFileSeesRedactedLines(t *testing.T) {
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Split(strings.TrimSuffix(pemKey, "\n"), "\n")[1:3] // the key's body lines
	for _, redact := range []bool{false, true} {
		opts := Options{MaxReadBytes: 4096}
		if redact {
			opts.Redactor = func() LineRedactor { return san.NewLineRedactor("grep") }
		}
		tw := newTestWS(t, opts)
		// Cut at the read cap (4,096 bytes less the line-number prefix)
		// nine bytes into the token.
		long := strings.Repeat("x ", 2040) + grepToken + " " + strings.Repeat("y", 100) + "\n"
		tw.write(t, map[string]string{"key.pem": "a\nb\n" + pemKey + "c\n", "long.txt": long})
		read := func(args string) string { return string(tw.sanitized(t, san, "read_file", args)) }
		var leaks []string
		for _, args := range []string{`{"paths":["key.pem"],"offset":4}`, `{"paths":["key.pem"],"offset":4,"limit":1}`, `{"paths":["key.pem"]}`} {
			if got := read(args); strings.Contains(got, body[0]) || strings.Contains(got, body[1]) {
				leaks = append(leaks, args)
			}
		}
		if got := read(`{"paths":["long.txt"]}`); strings.Contains(got, grepToken[:8]) {
			leaks = append(leaks, "long.txt, cut inside the token")
		}
		switch {
		case redact && len(leaks) > 0:
			t.Errorf("with the line redactor, these reads leak: %v", leaks)
		case !redact && len(leaks) != 3:
			// The reads that leaked before the change: the two windows into
			// the key and the cut line (the whole key the output sanitizer
			// sees alone). The test must see them, or it proves nothing.
			t.Errorf("without the line redactor, these reads leak %v; want the two windows and the cut line", leaks)
		}
	}
}
