package fs

import (
	"context"
	"encoding/json"
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
		spec := tw.tool(t, "read_file").Spec()
		read := func(args string) string {
			res, err := tw.exec(t, "read_file", args)
			mustOK(t, err)
			data, _ := json.Marshal(res)
			out, _, err := san.Output(context.Background(), &spec, data)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
		var leaks []string
		for _, args := range []string{`{"paths":["key.pem"],"offset":4}`, `{"paths":["key.pem"],"offset":4,"limit":1}`, `{"paths":["key.pem"]}`} {
			if got := read(args); strings.Contains(got, body[0]) || strings.Contains(got, body[1]) {
				leaks = append(leaks, args)
			}
		}
		if got := read(`{"paths":["long.txt"]}`); strings.Contains(got, grepToken[:8]) {
			leaks = append(leaks, "long.txt, cut inside the token")
		}
		if redact && len(leaks) > 0 {
			t.Errorf("with the line redactor, these reads leak: %v", leaks)
		}
		if !redact {
			t.Logf("without the line redactor, these reads leak: %v", leaks)
		}
	}
}
