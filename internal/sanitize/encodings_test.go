package sanitize

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMoreEncodingsAreRedacted (issue 24, finding 9): secrets written as
// the numbers of their bytes — separated hex (od, hexdump -C, xxd with its
// offsets and ASCII column, colons), 0x lists, decimal lists —, in base32,
// as hex or base64 wrapped over two lines, or as a token split across two
// lines are redacted in a whole text (RedactString, Output): what is
// gone is every listed piece of the secret in that encoding, and its
// ASCII rendering; what stays is the text around it. The one-line ones
// are redacted in a stream written byte by byte too.
func TestMoreEncodingsAreRedacted(t *testing.T) {
	s := newTB(t, Config{})
	for _, c := range encodedFiles() {
		t.Run(c.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "encoded", c.file))
			if err != nil {
				t.Fatal(err)
			}
			in := "before\n" + string(b) + "after\n"
			outs := redactedThreeWays(t, s, in, c.kind, c.oneLine)
			for how, o := range outs {
				for _, g := range c.gone {
					if strings.Contains(o, g) {
						t.Errorf("%s leaves %q:\n%s", how, g, o)
					}
				}
				if !strings.Contains(o, c.kept) || !strings.HasPrefix(o, "before\n") || !strings.HasSuffix(o, "after\n") ||
					!strings.Contains(o, "[REDACTED:"+c.kind+"]") || strings.Count(o, "\n") != strings.Count(in, "\n") {
					t.Errorf("%s:\n%s", how, o)
				}
			}
		})
	}
}

// encodedFile is a secret in an encoding of testdata/encoded: the pieces
// of it that must be gone once redacted, and text around it that stays.
type encodedFile struct {
	file, kind string
	gone       []string
	kept       string
	oneLine    bool
}

func encodedFiles() []encodedFile {
	return []encodedFile{
		{"xxd.txt", "github_token", []string{"3868 5471", "4c6d 5635", "3146 6139", "R8hTq", "2ZLmV5xW0cNs4Ye7", "Kd1Fa9Pb3Gu6Jo0"}, "00000010:", false},
		{"hexdump-C.txt", "github_token", []string{"38 68 54 71", "4c 6d 56 35", "31 46 61 39", "2ZLmV5xW0cNs4Ye7", "Kd1Fa9Pb3Gu6Jo0"}, "00000020  ", false},
		{"od-tx1.txt", "github_token", []string{"38 68 54 71", "4c 6d 56 35", "31 46 61 39"}, " 74 6f 6b 65", false},
		{"od-tx1-offsets.txt", "github_token", []string{"38 68 54 71", "4c 6d 56 35", "31 46 61 39"}, "0000020 ", false},
		{"xxd-p.txt", "github_token", []string{"5238685471", "3146613950", "4c6d563578"}, "746f6b656e3a20", false},
		{"colon-hex.txt", "github_token", []string{"38:68:54:71", "31:46:61:39"}, "74:6f:6b:65", true},
		{"0x-list.txt", "github_token", []string{"0x38, 0x68, 0x54", "0x31, 0x46, 0x61"}, "unsigned char k[] = {0x74", true},
		{"0x-array.txt", "github_token", []string{"0x38, 0x68, 0x54", "0x31, 0x46, 0x61"}, "unsigned char k[] = {", false},
		{"decimal-list.txt", "github_token", []string{"56,104,84,113", "49,70,97,57"}, "String.fromCharCode(116", true},
		{"decimal-array.txt", "github_token", []string{"56, 104, 84, 113", "49, 70, 97, 57"}, "key = bytes([", false},
		{"base32-w0.txt", "aws_access_key_id", []string{"KBNECTJS", "QKRLFGFA"}, "MF3XGX3B", true},
		{"base32.txt", "github_token", []string{"UTDNKY2X", "MNHHGNCZ"}, "ORXWWZLO", false},
		{"base64-wrapped.txt", "aws_access_key_id", []string{"UVlMUE1O", "NUhISEZQ"}, "config: dGhlIGRlcGxveSBqb2Ig", false},
		{"fold.txt", "github_token", []string{"R8hTq2ZLmV5x", "e7Kd1Fa9Pb3G"}, "token: ", false},
		{"split-indented.txt", "github_token", []string{"R8hTq2ZLmV5x", "W0cNs4Ye7Kd1"}, "export GITHUB_TOKEN=", false},
		// Issue 38, finding 4: read_file's numbered lines, a JSON text's
		// two fields, literals joined in code, a continued shell line.
		{"cat-n.txt", "github_token", []string{"R8hTq2ZLmV5x", "W0cNs4Ye7Kd1"}, "     2\t    ", false},
		{"json-fields.txt", "github_token", []string{"R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"}, `","part2":"`, true},
		{"json-pretty.txt", "github_token", []string{"R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"}, `"part2": "`, false},
		{"cat-n-json.txt", "github_token", []string{"R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"}, "     3\t  \"part2\": \"", false},
		{"concat.txt", "github_token", []string{"R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"}, "\" +\n\t\"", false},
		{"continued.txt", "github_token", []string{"R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"}, "' ./deploy", false},
	}
}

// FuzzAcrossLines: fuzzed text before and after a secret in any encoding
// of testdata/encoded (on lines of their own) leaves none of its pieces,
// and no line break is lost.
func FuzzAcrossLines(f *testing.F) {
	for _, seed := range []string{"", "x", "00000030: 6869", "0x41,", "65, 66,", "ghp_", "==", "a b c d", "\r", "  |abc|"} {
		f.Add(seed, uint8(0))
	}
	s := newTB(f, Config{})
	files := encodedFiles()
	texts := make([]string, len(files))
	for i, c := range files {
		b, err := os.ReadFile(filepath.Join("testdata", "encoded", c.file))
		if err != nil {
			f.Fatal(err)
		}
		texts[i] = string(b)
	}
	f.Fuzz(func(t *testing.T, in string, which uint8) {
		if strings.ContainsAny(in, "\n\r") || strings.Contains(in, "ghp_") {
			in = strings.NewReplacer("\n", " ", "\r", " ", "ghp_", "ghp").Replace(in)
		}
		k := int(which) % len(files)
		text := in + "\n" + texts[k] + in + "\n"
		out := s.RedactString("run_command", text)
		for _, g := range files[k].gone {
			if strings.Contains(out, g) && !strings.Contains(in, g) {
				t.Fatalf("%s: %q left in %q", files[k].file, g, out)
			}
		}
		if strings.Count(out, "\n") != strings.Count(text, "\n") {
			t.Fatalf("a line break lost: %q became %q", text, out)
		}
	})
}

// TestTokenSplitAcrossFields (issue 24, finding 9): a token split between
// two string values of a JSON result is redacted in both.
func TestTokenSplitAcrossFields(t *testing.T) {
	s := newTB(t, Config{})
	for _, doc := range []string{
		`{"part1":"ghp_R8hTq2ZLmV5xW0cN","part2":"s4Ye7Kd1Fa9Pb3Gu6Jo0","n":1}`,
		`{"lines":["the key is AKIAQYLP","MN5HHHFPZAM2 ok"]}`,
		`{"a":"x \u00e9 ghp_R8hTq2ZLmV5xW0cN","b":{"c":"s4Ye7Kd1Fa9Pb3Gu6Jo0 \"q\""}}`,
	} {
		out, rep, _ := s.Output(context.Background(), commandSpec, []byte(doc))
		for _, g := range []string{"R8hTq2ZLm", "s4Ye7Kd1Fa9", "AKIAQYLP", "MN5HHHFPZAM2"} {
			if strings.Contains(string(out), g) {
				t.Errorf("%s leaves %q: %s", doc, g, out)
			}
		}
		if !json.Valid(out) || rep.Redactions < 2 {
			t.Errorf("%s: %s %+v", doc, out, rep)
		}
		again, _, _ := s.Output(context.Background(), commandSpec, out)
		if string(again) != string(out) {
			t.Errorf("not idempotent: %s then %s", out, again)
		}
	}
}

// TestEncodingsStayClean: lists, dumps and joined lines of ordinary text
// are left as they are.
func TestEncodingsStayClean(t *testing.T) {
	s := newTB(t, Config{})
	for _, in := range []string{
		"00000000: 6865 6c6c 6f20 776f 726c 6420 616e 6420  hello world and \n00000010: 6120 6c6f 6e67 6572 2074 6578 7420 6865  a longer text he\n",
		"ports: 80, 443, 8080, 8443, 9090, 9100, 3000, 5432, 6379, 27017, 11211\n",
		"{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c}\n",
		"sha256 Fingerprint=3A:F2:9C:11:0B:7E:55:D1:4A:88:C0:2E:91:6F:BB:03:D4:27:E8:19\n",
		"72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33\n",
		"a long identifier likeThisOneThatGoesOnAndOn\nandThisOneToo that joins\n",
		"MZXW6YTBOI======\nJBSWY3DPEBLW64TMMQQQ====\n",
		// Issue 38: quoted words that join to nothing, a marker followed
		// by a line that is not the rest of a secret.
		`{"name":"deployment-controller","image":"registry.example.org/app:1.2.3"}` + "\n",
		"msg := \"the quick brown fox jumps \" +\n\t\"over the lazy dog again\"\n",
		"token: [REDACTED:github_token]\nDeployment finished\n",
		"password=[REDACTED:password]\nhostname1234\n",
		"[REDACTED:secret]\n     2\tv1.2.3-rc1\n",
		`{"password":"[REDACTED:password]","request_id":"3f2c9a8b7d6e5f4a3b2c1d0e"}` + "\n",
	} {
		if out := s.RedactString("run_command", in); out != in {
			t.Errorf("%q became %q", in, out)
		}
	}
}

// TestSplitTokensInFilesAndOutputs (issue 38, finding 4): a token split
// across two lines of a file, or across two string fields of a JSON
// text, came back whole through read_file (whose numbered lines stood
// between the pieces) and a command's output (a JSON text in stdout is
// text, not values). Each form, as read_file and a command return it,
// leaves neither piece; what lies between the pieces (a line number, a
// key, the glue of two literals) stays.
func TestSplitTokensInFilesAndOutputs(t *testing.T) {
	s := newTB(t, Config{})
	const a, b = "ghp_R8hTq2ZLmV5xW0cN", "s4Ye7Kd1Fa9Pb3Gu6Jo0"
	for _, c := range []struct{ name, text, kept string }{
		{"numbered lines", "     1\tkey = " + a + "\n     2\t" + b + "\n", "     2\t"},
		{"numbered, indented", "     9\tx:\n    10\t  " + a + "\n    11\t    " + b + "\n", "    11\t    "},
		{"JSON fields", `{"a":"` + a + `","b":"` + b + `"}`, `","b":"`},
		{"JSON fields, one per line", "{\n  \"a\": \"" + a + "\",\n  \"b\": \"" + b + "\"\n}\n", "\",\n  \"b\": \""},
		{"JSON array", `["` + a + `", "` + b + `"]`, `", "`},
		{"numbered JSON", "     1\t{\n     2\t  \"a\": \"" + a + "\",\n     3\t  \"b\": \"" + b + "\"\n     4\t}\n", "     3\t  \"b\": \""},
		{"Go literals", "t := \"" + a + "\" +\n\t\"" + b + "\"\n", "\" +\n\t\""},
		{"Python literals", "t = ('" + a + "'\n     '" + b + "')\n", "'\n     '"},
		{"C literals", "char *t = \"" + a + "\" \"" + b + "\";\n", "\" \""},
		{"shell continuation", "curl -H " + a + "\\\n" + b + " x\n", " x\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for where, doc := range map[string]any{
				"read_file": map[string]any{"files": []any{map[string]any{"path": "f", "content": c.text}}},
				"command":   map[string]any{"ok": true, "stdout": c.text, "stderr": ""},
			} {
				raw, _ := json.Marshal(doc)
				out, rep, err := s.Output(context.Background(), commandSpec, raw)
				if err != nil || !json.Valid(out) {
					t.Fatalf("%s: %v %s", where, err, out)
				}
				if strings.Contains(string(out), "R8hTq2ZLm") || strings.Contains(string(out), "s4Ye7Kd1Fa9") || rep.ByKind["github_token"] < 2 {
					t.Errorf("%s: %s (%+v)", where, out, rep)
				}
				kept, _ := json.Marshal(c.kept)
				if !strings.Contains(string(out), strings.Trim(string(kept), `"`)) {
					t.Errorf("%s: %q gone from %s", where, c.kept, out)
				}
				if again, _, _ := s.Output(context.Background(), commandSpec, out); string(again) != string(out) {
					t.Errorf("%s: not idempotent: %s then %s", where, out, again)
				}
			}
			if o := s.RedactString("run_command", c.text); strings.Contains(o, "R8hTq2ZLm") || strings.Contains(o, "s4Ye7Kd1Fa9") {
				t.Errorf("RedactString: %q", o)
			}
		})
	}
	// read_file's way: the line redactor first (line by line, so
	// GITHUB_TOKEN=<first piece> alone is a secret assignment), then the
	// lines numbered, then Output: the marker at the end of the line
	// stands where the first piece was, and the second piece follows it.
	for _, raw := range []string{
		"export GITHUB_TOKEN=" + a + "\n  " + b + "\n",
		"token = \"" + a + "\" +\n\t\"" + b + "\"\n",
	} {
		lines := s.NewLineRedactor("read_file").Lines([]byte(raw))
		var numbered strings.Builder
		for i, l := range strings.SplitAfter(string(lines), "\n") {
			if l != "" {
				fmt.Fprintf(&numbered, "%6d\t%s", i+1, l)
			}
		}
		doc, _ := json.Marshal(map[string]any{"files": []any{map[string]any{"path": "f", "content": numbered.String()}}})
		out, _, _ := s.Output(context.Background(), commandSpec, doc)
		if strings.Contains(string(out), "R8hTq2ZLm") || strings.Contains(string(out), "s4Ye7Kd1Fa9") {
			t.Errorf("read_file's way, %q: %s", raw, out)
		}
	}
}
