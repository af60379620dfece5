package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// shellBlocks are the shell commands a reader copies: the sh, bash,
// console and plain blocks of the documentation, and the commands in the comments
// of the example configurations.
func shellBlocks(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, file := range markdown(t) {
		_, blocks := parse(t, file)
		for _, b := range blocks {
			switch b.lang {
			case "", "sh", "bash", "console", "shell":
				out[file+":"+strconv.Itoa(b.line)] += b.text
			}
		}
	}
	examples, err := filepath.Glob("../examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range examples {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var comments strings.Builder
		for line := range strings.Lines(string(b)) {
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
				comments.WriteString(c)
				if !strings.HasSuffix(c, "\n") {
					comments.WriteString("\n")
				}
			}
		}
		out[file] = comments.String()
	}
	return out
}

var (
	curlData  = regexp.MustCompile(`(?:^|\s)(?:-d|--data(?:-binary|-raw)?|--json)[\s=]`)
	shellVar  = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)`)
	jsonCType = regexp.MustCompile(`(?i)content-type:\s*application/json|--json\s`)
)

// TestCurlSendsJSON: every curl the documentation and the examples show
// that sends a body says it is JSON. Without Content-Type, curl -d sends
// application/x-www-form-urlencoded, and toold answers 415: the command
// fails as written.
func TestCurlSendsJSON(t *testing.T) {
	checked := 0
	for where, text := range shellBlocks(t) {
		// One command per logical line: continuations joined.
		text = strings.ReplaceAll(text, "\\\n", " ")
		for line := range strings.Lines(text) {
			i := strings.Index(line, "curl ")
			if i < 0 || !curlData.MatchString(line[i:]) {
				continue
			}
			checked++
			cmd := line[i:]
			if jsonCType.MatchString(cmd) {
				continue
			}
			// A header held in a variable set in the same block ($H).
			ok := false
			for _, m := range shellVar.FindAllStringSubmatch(cmd, -1) {
				def := regexp.MustCompile(`(?m)^\s*(?:export\s+)?` + m[1] + `=(.*)$`).FindStringSubmatch(text)
				ok = ok || def != nil && jsonCType.MatchString(def[1]+" ")
			}
			if !ok {
				t.Errorf("%s: this curl sends a body without Content-Type: application/json (toold answers 415):\n%s", where, strings.TrimSpace(cmd))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no curl with a body found: the test checks nothing")
	}
}
