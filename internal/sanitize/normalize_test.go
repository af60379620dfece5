package sanitize

import (
	"bytes"
	"context"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

const (
	encToken = "ghp_R8hTq2ZLmV5xW0cNs4Ye7Kd1Fa9Pb3Gu6Jo0"
	awsKeyID = "AKIAQYLPMN5HHHFPZAM2"
)

func pctAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

func mapChars(s string, f func(c byte) string) string {
	var b strings.Builder
	for i := range len(s) {
		b.WriteString(f(s[i]))
	}
	return b.String()
}

// every inserts sep after every n-th byte of s.
func every(s string, n int, sep string) string {
	var b strings.Builder
	for i := range len(s) {
		if i > 0 && i%n == 0 {
			b.WriteString(sep)
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// groupsOf splits s into groups of n bytes joined by a space.
func groupsOf(s string, n int) string {
	var parts []string
	for len(s) > n {
		parts, s = append(parts, s[:n]), s[n:]
	}
	return strings.Join(append(parts, s), " ")
}

// listOf writes the bytes of s each with format, joined by sep.
func listOf(s, format, sep string) string {
	items := make([]string, len(s))
	for i := range len(s) {
		items[i] = fmt.Sprintf(format, s[i])
	}
	return strings.Join(items, sep)
}
func b64raw(s string) string    { return base64.RawStdEncoding.EncodeToString([]byte(s)) }
func b64URLEnc(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

// encodedCases are secrets in every encoding the views decode; each
// passed the detectors verbatim before views existed.
func encodedCases() []struct{ name, enc, kind string } {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1x2y3z4\nAbCdEfGh\n-----END RSA PRIVATE KEY-----\n"
	// "??>" and "~~~" put '/', '+' (std) or '_', '-' (url) in the encoding.
	urlText := "token ??>" + encToken + " ~~~"
	return []struct{ name, enc, kind string }{
		{"base64 std", b64("token: " + encToken + "\n"), "github_token"},
		{"base64 std unpadded", b64raw("key " + awsKeyID + " x"), "aws_access_key_id"},
		{"base64 url", b64URLEnc(urlText), "github_token"},
		{"base64 of a k8s private key", b64(pem), "private_key"},
		{"hex", hex.EncodeToString([]byte("id=" + awsKeyID)), "aws_access_key_id"},
		{"percent all", pctAll(encToken), "github_token"},
		{"percent underscore", strings.Replace(encToken, "_", "%5F", 1), "github_token"},
		{"percent lower hex", strings.ToLower(pctAll(awsKeyID)), "aws_access_key_id"},
		{`\u all`, mapChars(encToken, func(c byte) string { return fmt.Sprintf(`\u%04x`, c) }), "github_token"},
		{`\u underscore`, strings.Replace(encToken, "_", `\u005F`, 1), "github_token"},
		{`\u{}`, mapChars(awsKeyID, func(c byte) string { return fmt.Sprintf(`\u{%x}`, c) }), "aws_access_key_id"},
		{`\U`, strings.Replace(encToken, "_", `\U0000005f`, 1), "github_token"},
		{`\x`, mapChars(encToken, func(c byte) string { return fmt.Sprintf(`\x%02x`, c) }), "github_token"},
		{"html named", strings.Replace(encToken, "_", "&lowbar;", 1), "github_token"},
		{"html decimal", mapChars(encToken, func(c byte) string { return fmt.Sprintf("&#%d;", c) }), "github_token"},
		{"html decimal no semicolons", mapChars(awsKeyID, func(c byte) string { return fmt.Sprintf("&#%d", c) }) + " ", "aws_access_key_id"},
		{"html hex", mapChars(encToken, func(c byte) string { return fmt.Sprintf("&#x%x;", c) }), "github_token"},
		{"zero-width space", every(encToken, 5, "\u200b"), "github_token"},
		{"zero-width joiner", every(awsKeyID, 3, "\u200d"), "aws_access_key_id"},
		{"soft hyphen", every(encToken, 4, "\u00ad"), "github_token"},
		{"word joiner and BOM", every(awsKeyID, 2, "\u2060\ufeff"), "aws_access_key_id"},
		{"html soft hyphen", every(encToken, 6, "&shy;"), "github_token"},
		{"escaped zero-width space", every(encToken, 6, `\u200B`), "github_token"},
		{"mixed encodings", "ghp" + `\u005f` + encToken[4:10] + "%41"[:0] + pctAll(encToken[10:20]) + "&#x" + fmt.Sprintf("%x", encToken[20]) + ";" + every(encToken[21:], 3, "\u200c"), "github_token"},
		{"base64 of percent-encoded", b64("t=" + pctAll(encToken)), "github_token"},
		{"percent-encoded base64", pctAll(b64("t: " + encToken)), "github_token"},
		{"double-escaped JSON", strings.Replace(encToken, "_", `\\u005f`, 1), "github_token"},
		{"assignment behind an entity", "password&#61;Tr0ub4dor&amp;3", "password"},
		{"e-mail behind an entity", "jane.doe&#64;example.org", "email"},
		{"URL password behind escaped slashes", `postgres:\/\/app:s3cr3tpw@db\/shop`, "url_password"},
		// Issue 24: lists of the bytes, on one line, and base32.
		{"separated hex", listOf(encToken, "%02x", " "), "github_token"},
		{"colon hex", listOf("key "+awsKeyID, "%02X", ":"), "aws_access_key_id"},
		{"0x list", "{" + listOf(encToken, "0x%02x", ", ") + "}", "github_token"},
		{"decimal list", "(" + listOf(encToken, "%d", ",") + ")", "github_token"},
		{"decimal list with blanks", "[" + listOf("id="+awsKeyID, "%d", ", ") + "]", "aws_access_key_id"},
		// A number before a hex list reads as the first item of a decimal
		// list, whose two-digit items are the hex list's first bytes.
		{"separated hex after a number", "0 " + listOf(encToken, "%02x", " ") + " 0", "github_token"},
		{"separated hex after a byte value", "n 255 7 " + listOf(encToken, "%02x", " "), "github_token"},
		{"colon hex after a number", "1:" + listOf(encToken, "%02x", ":"), "github_token"},
		{"wide hex after a number", "0 " + groupsOf(hex.EncodeToString([]byte(encToken)), 4), "github_token"},
		{"base32", base32.StdEncoding.EncodeToString([]byte("token: " + encToken + "\n")), "github_token"},
		{"base32 unpadded", base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("key " + awsKeyID + " x")), "aws_access_key_id"},
	}
}

// redactedThreeWays is in as RedactString, Output (a command's stdout,
// whose report must count kind) and, with stream, a stream written byte by
// byte redact it.
func redactedThreeWays(t *testing.T, s *Sanitizer, in, kind string, stream bool) map[string]string {
	t.Helper()
	outs := map[string]string{"RedactString": s.RedactString("run_command", in)}
	data, _ := json.Marshal(map[string]string{"stdout": in})
	out, rep, _ := s.Output(context.Background(), commandSpec, data)
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	outs["Output"] = got["stdout"]
	if rep.ByKind[kind] == 0 {
		t.Errorf("Output report %+v lacks %s", rep, kind)
	}
	if stream {
		var buf bytes.Buffer
		r := s.NewStreamRedactor(&buf, "run_command")
		for i := range len(in) {
			_, _ = r.Write([]byte{in[i]})
		}
		_ = r.Flush()
		outs["Stream"] = buf.String()
	}
	return outs
}

// TestEncodedSecretsAreRedacted: each encoded secret is redacted whole, by
// its kind, with the text around it kept, in RedactString, Output, and a
// stream written byte by byte; neither the encoding nor the decoded secret
// is left.
func TestEncodedSecretsAreRedacted(t *testing.T) {
	s := newTB(t, Config{})
	for _, tc := range encodedCases() {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "base64 url") && !strings.ContainsAny(tc.enc, "-_") {
				t.Fatalf("%q is not in the URL alphabet", tc.enc)
			}
			in := "before " + tc.enc + " after"
			outs := redactedThreeWays(t, s, in, tc.kind, true)
			for path, got := range outs {
				if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") ||
					!strings.Contains(got, "[REDACTED:"+tc.kind+"]") {
					t.Errorf("%s: %q\n -> %q", path, in, got)
				}
				for _, leak := range []string{encToken, encToken[4:], awsKeyID, tc.enc, "Tr0ub4dor", "jane.doe", "s3cr3tpw", "MIIEowIBAAKCAQEA"} {
					if strings.Contains(got, leak) && !strings.Contains(in, "[REDACTED") {
						t.Errorf("%s leaks %q: %q", path, leak, got)
					}
				}
			}
			if again := s.RedactString("run_command", outs["RedactString"]); again != outs["RedactString"] {
				t.Errorf("not idempotent: %q -> %q", outs["RedactString"], again)
			}
		})
	}
}

// TestEncodingsInCleanText: escapes, entities and base64 that hide no
// secret are left exactly as they are.
func TestEncodingsInCleanText(t *testing.T) {
	s := newTB(t, withIP)
	png := make([]byte, 300)
	for i := range png {
		png[i] = byte(i*7 + i*i*13)
	}
	cases := []string{
		"GET https://example.com/search?q=hello%20world&lang=en%2DGB HTTP/1.1",
		"100% of 50%; 3%XX of %zz",
		`{"msg":"line one\nline two\ttab \"quoted\" \u00e9t\u00e9 \ud83d\ude00","path":"C:\\Users\\me"}`,
		`fmt.Printf("%s\n", x) // \x41 means A, \u2026 an ellipsis`,
		"<p>Tom &amp; Jerry &lt;3 &copy; 2024 &#8212; caf&eacute; &unknown; & more</p>",
		"data:image/png;base64," + base64.StdEncoding.EncodeToString(png),
		"sha256:" + strings.Repeat("9f86d081884c7d659a2feaa0c55ad015", 2),
		"commit 3f2a9c8e1b7d4a6f0e5c2b9a8d7e6f5a4b3c2d1e",
		"uuid 123e4567-e89b-12d3-a456-426614174000",
		"go.sum: golang.org/x/text v0.14.0 h1:ScX5w1eTa3QqT8oi6+ziP7dTV1S2+ALU0bI+0zXKWiQ=",
		b64("just some harmless text, nothing to see here"),
		hex.EncodeToString([]byte("harmless words in hex")),
		"TestEncodedSecretsAreRedactedEverywhere internal/sanitize/normalize_test.go",
		"soft\u00adhyphen\u200bjoined text stays as written",
		"word\u2060joiner and a trailing lone \\u and &# and %",
	}
	for _, in := range cases {
		if got := s.RedactString("run_command", in); got != in {
			t.Errorf("%q\n -> %q", in, got)
		}
	}
}

// TestViewDecoding pins the decoder itself: what each escape becomes and
// the spans it maps back to.
func TestViewDecoding(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a%41b", "aAb"},
		{`\ud83d\ude00!`, "😀!"},
		{`\ud83d alone`, `\ud83d alone`}, // a lone surrogate is not decoded
		{`\u{1F600}`, "😀"},
		{`\x41\x4A`, "AJ"},
		{`a\\b\/c`, `a\b/c`},
		{"&#65;&#x42;&#X43&amp;&lt;", "ABC&<"},
		{"&#0; &#;", "&#0; &#;"},
		{"a\u200bb\u00adc\ufeffd", "abcd"},
		{"x " + b64("hello there, a text!") + " y", "x hello there, a text! y"},
	}
	for _, tc := range cases {
		var v view
		changed := v.decode(tc.in, 0, false) == 0
		got := tc.in
		if changed {
			got = string(v.b)
		}
		if got != tc.want {
			t.Errorf("%q -> %q, want %q", tc.in, got, tc.want)
		}
	}
	var v view
	in := "ab%41" + b64("a view of some text") + "z"
	v.decode(in, 0, false)
	// %41 is 2-5; the run is 5-33 with its padding, 19 bytes in 7 quanta.
	last := len(v.b) - 2
	if v.start[2] != 2 || v.end[2] != 5 || v.start[3] != 5 || v.end[3] != 9 || v.start[5] != 5 || v.start[6] != 9 ||
		v.start[last] != 29 || v.end[last] != 33 || v.start[last+1] != 33 {
		t.Errorf("spans %v %v", v.start, v.end)
	}
}

// FuzzDecodedView: spans are in range and ordered; a text without escapes
// is its own view; redaction never leaves a decoded secret behind.
func FuzzDecodedView(f *testing.F) {
	for _, tc := range encodedCases() {
		f.Add(tc.enc, uint8(0))
	}
	for _, s := range []string{"", "%", "\\", "&", "\\u{", "&#x", "\xe2\x80", "a%4", `\ud800\u`, "=="} {
		f.Add(s, uint8(3))
	}
	s := newTB(f, Config{})
	f.Fuzz(func(t *testing.T, in string, enc uint8) {
		var v view
		switch v.decode(in, 0, false) {
		case -1:
			// The probe only samples a run; decoding may reject it.
			if p := v.decode(in, 0, true); p != -1 && ntab[in[p]]&nB64 == 0 {
				t.Fatalf("probe found a change at %d in %q, decode none", p, in)
			}
		case 0:
			if p := v.decode(in, 0, true); p < 0 {
				t.Fatalf("probe found no change in %q, decode did: %q", in, v.b)
			}
			if len(v.start) != len(v.b) || len(v.end) != len(v.b) {
				t.Fatalf("maps %d %d for %d bytes", len(v.start), len(v.end), len(v.b))
			}
			prevStart, prevEnd := int32(0), int32(0)
			for i := range v.b {
				a, b := v.start[i], v.end[i]
				if a < 0 || b > int32(len(in)) || a >= b || a < prevStart || b < prevEnd {
					t.Fatalf("byte %d of the view of %q maps to [%d,%d)", i, in, a, b)
				}
				prevStart, prevEnd = a, b
			}
		default:
			t.Fatal("decode returned neither 0 nor -1")
		}
		if !strings.ContainsAny(in, "%\\&") && utf8.ValidString(in) && !strings.ContainsFunc(in, invisible) &&
			!hasLongRun(in) && v.decode(in, 0, false) != -1 {
			t.Fatalf("%q has nothing to decode, yet its view is %q", in, v.b)
		}
		// Wrap a secret in the fuzzer's text with one of the encodings,
		// set off by " ; ": a blank alone would join a byte list of the
		// fuzzer's ("70 ") to the secret's, and the decoded "pghp_…" is
		// no token, as it is not in plain text (a secret starts at a word
		// boundary, decoded or not).
		c := encodedCases()[int(enc)%len(encodedCases())]
		text := in + " ; " + c.enc + " ; " + in
		out := s.RedactString("run_command", text)
		if strings.Contains(out, c.enc) {
			t.Fatalf("encoded secret %q left in %q", c.enc, out)
		}
		if strings.Contains(out, encToken) && !strings.Contains(in, encToken) {
			t.Fatalf("decoded secret left in %q", out)
		}
	})
}

func hasLongRun(s string) bool {
	n := 0
	for i := range len(s) {
		if ntab[s[i]]&nB64 != 0 {
			if n++; n >= minB64Run {
				return true
			}
		} else {
			n = 0
		}
	}
	return false
}

// BenchmarkViewProbe measures what views cost clean text: the probe for
// a line to decode.
func BenchmarkViewProbe(b *testing.B) {
	for _, corpus := range []string{"clean", "canary"} {
		text := corpusText(b, corpus, 1<<20)
		b.Run(corpus, func(b *testing.B) {
			var v view
			cpuLoop(b, len(text), func() {
				for i := v.decode(text, 0, true); i >= 0; i = v.decode(text, i+1, true) {
				}
			})
		})
	}
}

// TestAdversarialViews: escapes, entities, invisible characters and
// base64 repeated on one line (views of views included) stay linear.
func TestAdversarialViews(t *testing.T) {
	s := newTB(t, withIP)
	text64 := b64("password=hunter2x ")
	for _, unit := range []string{`\u{`, `\u{41`, "%41", "%2541", "&#65;", "&#x41", "&amp;", "&lowbar;", "&shy;", "\u200b", `\ud800`, `\\`, "ghp%5F", "%67hp_",
		text64, text64 + "%", "QUtJQV" + "%", pctAll(text64), "&#" + "x"} {
		inputs := map[int]string{}
		growthCPU(t, unit, 1<<18, func(n int) {
			if inputs[n] == "" {
				inputs[n] = strings.Repeat(unit, n/len(unit))
			}
			_ = s.RedactString("t", inputs[n])
		})
	}
}

// growthCPU is growth measured in the CPU time of the calling thread:
// these inputs allocate views of megabytes, and on a shared machine the
// wall-clock time of the larger size moves with everything else running.
// The thread's CPU clock ticks coarsely, so the quarter size is run four
// times in one measurement: the same work as the whole size, if linear
// (quadratic is 4 times as much).
func growthCPU(t *testing.T, name string, n int, run func(n int)) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	least := func(n, reps int) time.Duration {
		best := time.Duration(1<<63 - 1)
		for range 3 {
			runtime.GC() // a collection the last run left owing is not this run's cost
			start := threadCPU()
			for range reps {
				run(n)
			}
			best = min(best, threadCPU()-start)
		}
		return best
	}
	run(n / 4) // build the inputs outside the timing
	run(n)
	if raceEnabled {
		return // the inputs ran (for the race detector); their timing means nothing here
	}
	quarters, whole := least(n/4, 4), least(n, 1)
	if whole > 3*quarters && whole > 50*time.Millisecond {
		t.Errorf("%s: %v of CPU for size %d after %v for four quarters", name, whole, n, quarters)
	}
}

// TestBase64KeepsTheRest: a finding in a base64 run redacts the quanta
// that encode it; what comes before and after still decodes to the same
// text, and holds no byte of the secret.
func TestBase64KeepsTheRest(t *testing.T) {
	s := newTB(t, Config{})
	before, after := "Dear team, the quarterly report is attached; questions to ", " please. Regards, the finance office."
	in := b64(before + "jane.doe@example.org" + after)
	got := s.RedactString("run_command", in)
	head, tail, ok := strings.Cut(got, "[REDACTED:email]")
	if !ok {
		t.Fatalf("%q -> %q", in, got)
	}
	h, err1 := base64.StdEncoding.DecodeString(head)
	tl, err2 := base64.StdEncoding.DecodeString(tail)
	if err1 != nil || err2 != nil || !strings.HasPrefix(before, string(h)) || !strings.HasSuffix(after, string(tl)) ||
		len(h) < len(before)-2 || len(tl) < len(after)-2 {
		t.Errorf("kept %q (%v) and %q (%v) of %q and %q", h, err1, tl, err2, before, after)
	}
}

// TestEncodedSecretBlockedInInput: in block mode an encoded secret in an
// argument refuses the call, naming the kind and pointer, never a value.
func TestEncodedSecretBlockedInInput(t *testing.T) {
	s := newTB(t, Config{Defaults: Policy{Input: InputPolicy{Secrets: "block"}}})
	for _, enc := range []string{b64("token: " + encToken), pctAll(encToken), every(encToken, 5, "\u200b")} {
		args := map[string]any{"q": map[string]any{"body": "see " + enc}}
		_, _, err := s.Input(context.Background(), directSpec, args)
		te, ok := tools.AsError(err)
		if !ok || te.Kind != tools.SecurityError || te.Code != "secret_blocked" || !strings.Contains(te.Message, "/q/body") ||
			!strings.Contains(te.Message, "github_token") || strings.Contains(te.Message, enc[:12]) {
			t.Errorf("%.30q: %v", enc, err)
		}
	}
}
