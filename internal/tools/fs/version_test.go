package fs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/toold/toold/internal/sanitize"
)

// shownText is read_file's content as a caller gets it (through the
// output sanitizer) without its line numbers, and without the last line
// break when the file has none.
func shownText(t *testing.T, tw *testWS, san *sanitize.Sanitizer, name string, finalBreak bool) string {
	t.Helper()
	var res readResult
	if err := json.Unmarshal(tw.sanitized(t, san, "read_file", `{"paths":[`+jsonString(name)+`]}`), &res); err != nil {
		t.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^ *\d+\t`).ReplaceAllString(res.Files[0].Content, "")
	if !finalBreak {
		text = strings.TrimSuffix(text, "\n")
	}
	return text
}

// TestSHA256IsOfTheShownText: the sha256 the file tools give is what
// sha256sum prints for a file without secrets, and the SHA-256 of the
// masked text for a file with one — never of the secret's bytes, so it
// is no offline oracle: two files that differ only in their secret have
// the same sha256 (issue 16's class). read_file's sha256 is the same for
// a window as for the whole file, and every value chains: read_file's
// works for edit_file, edit_file's for write_file, write_file's for the
// next edit, and each equals what read_file gives next.
func TestSHA256IsOfTheShownText(t *testing.T) {
	other := strings.Replace(grepToken, "Qm7", "Zz1", 1)
	cases := []struct {
		name, content string
		secret        bool
	}{
		{"plain", "a\nb\nc\n", false},
		{"plain, no final break", "a\nb\nc", false},
		{"a literal marker, no secret", "x = \"[REDACTED:password]\"\n", false},
		{"token", "APP=shop\nGITHUB_TOKEN=" + grepToken + "\nDEBUG=1\n", true},
		{"token, no final break", "APP=shop\nGITHUB_TOKEN=" + grepToken, true},
		{"password", "user: jane\npassword=hunter22\n", true},
		{"key block", "before\n" + pemKey + "after\n", true},
		{"CRLF", "APP=shop\r\nGITHUB_TOKEN=" + grepToken + "\r\n", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			san, err := sanitize.New(sanitize.Config{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			tw := newTestWS(t, Options{Redactor: func() LineRedactor { return san.NewLineRedactor("grep") }})
			tw.write(t, map[string]string{"f": c.content})
			got := tw.shownSHA(t, "f")
			shown := shownText(t, tw, san, "f", strings.HasSuffix(c.content, "\n"))
			if c.secret == (got == sum(c.content)) {
				t.Errorf("sha256 %s; of the bytes %s; a secret in the file: %v", got, sum(c.content), c.secret)
			}
			if got != sum(shown) {
				t.Errorf("sha256 %s is not that of the text shown (%s): %q", got, sum(shown), shown)
			}
			if alt := strings.ReplaceAll(strings.ReplaceAll(c.content, grepToken, other), "hunter22", "letmein7"); alt != c.content {
				tw.write(t, map[string]string{"g": alt})
				if g := tw.shownSHA(t, "g"); g != got {
					t.Errorf("another secret gives another sha256 (%s, %s): the hash depends on it", got, g)
				}
			}
			res, err := tw.exec(t, "read_file", `{"paths":["f"],"offset":2}`)
			mustOK(t, err)
			if w := res.(readResult).Files[0].SHA256; w != got {
				t.Errorf("a window's sha256 %s, the whole file's %s", w, got)
			}

			// The chain: read -> edit -> write -> edit, each value taken
			// from the last answer and equal to read_file's next one.
			first := strings.SplitN(c.content, "\n", 2)[0]
			r, err := tw.exec(t, "edit_file", editArgsJSON("f", first, first+" ", 0, got))
			mustOK(t, err)
			got = r.(editResult).SHA256
			if want := tw.shownSHA(t, "f"); got != want {
				t.Fatalf("edit_file gave %s, read_file then %s", got, want)
			}
			r, err = tw.exec(t, "write_file", fmt.Sprintf(`{"path":"f","content":%s,"expected_sha256":%q}`, jsonString(c.content), got))
			mustOK(t, err)
			got = r.(writeResult).SHA256
			if want := tw.shownSHA(t, "f"); got != want {
				t.Fatalf("write_file gave %s, read_file then %s", got, want)
			}
			_, err = tw.exec(t, "edit_file", editArgsJSON("f", first, first+"!", 0, got))
			mustOK(t, err)
		})
	}
}

// FuzzVersion: a file's sha256 is the same streamed in any pieces as in
// memory, read_file gives the same, and it is of the bytes whenever the
// line redactor leaves them as they are.
func FuzzVersion(f *testing.F) {
	for _, s := range []string{"", "a", "a\n", "\n\n", "a\r\nb", "password=hunter22", "password=hunter22\n",
		"x\n" + pemKey, pemKey + "tail", "GITHUB_TOKEN=" + grepToken + "\nz", "\x00bin"} {
		f.Add([]byte(s))
	}
	san, err := sanitize.New(sanitize.Config{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	tw := newTestWS(f, Options{Redactor: func() LineRedactor { return san.NewLineRedactor("grep") }})
	f.Fuzz(func(t *testing.T, data []byte) {
		w := tw.w
		whole := w.versionOf(data)
		streamed, err := w.version(iotest.OneByteReader(bytes.NewReader(data)), 0)
		if err != nil || streamed != whole {
			t.Fatalf("streamed %s (%v), in memory %s", streamed, err, whole)
		}
		if bytes.Equal(san.NewLineRedactor("grep").Lines(bytes.Clone(data)), data) && whole != sum(string(data)) {
			t.Fatalf("nothing masked, but the sha256 %s is not of the bytes (%s)", whole, sum(string(data)))
		}
		if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 || len(data) == 0 {
			return // read_file shows text only
		}
		tw.write(t, map[string]string{"v": string(data)})
		if got := tw.shownSHA(t, "v"); got != whole {
			t.Fatalf("read_file gives %s, version %s", got, whole)
		}
	})
}
