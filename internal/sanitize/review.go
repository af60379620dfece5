package sanitize

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

// The approver's view of a call's arguments. A person deciding on a call
// must see what will run. The log redactor hides anything shaped like a
// secret, and that is blinding here: a shell script between a BEGIN and
// an END PRIVATE KEY line showed as one "[REDACTED:private_key]". A
// right-to-left override made "report\u202egpj.sh" read "reporths.jpg".
// So Review shows the arguments with:
//
//   - real secrets redacted, each noted with its kind, line, column and
//     length: the approver knows what is hidden and where;
//   - content that only looks like a secret shown, noted with why: a key
//     block that is not a key it can check (keyBlock), an assigned value
//     that is a command;
//   - invisible and bidirectional format characters escaped as \uXXXX in
//     the JSON text, and noted;
//   - multi-line strings noted with their line count (the console shows
//     them as numbered text).

// ReviewNote says what an approver must know about one string of the
// arguments (a value, or a member's name when Key is set).
type ReviewNote struct {
	Pointer string `json:"pointer"`
	Key     bool   `json:"key,omitempty"`
	// Lines is the line count of a string of more than one line.
	Lines int `json:"lines,omitempty"`
	// Secrets are redacted; Shown looked like secrets and are shown.
	Secrets []ReviewSpan `json:"secrets,omitempty"`
	Shown   []ReviewSpan `json:"shown,omitempty"`
	// FormatChars are invisible or bidirectional characters, escaped.
	FormatChars []FormatChar `json:"format_chars,omitempty"`
	// More counts the spans and characters past maxNoted of each list.
	More int `json:"more,omitempty"`
}

// ReviewSpan is where a finding was in the original string: line and
// column from 1, in characters, and its length in characters.
type ReviewSpan struct {
	Kind    string `json:"kind"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	EndLine int    `json:"end_line,omitempty"`
	Length  int    `json:"length"`
	Why     string `json:"why,omitempty"`
}

// FormatChar is one invisible or bidirectional character.
type FormatChar struct {
	Code   string `json:"code"`
	Name   string `json:"name"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

// maxNoted bounds each list of a note: a megabyte of zero-width spaces is
// one note with a count, not a million entries.
const maxNoted = 16

// Review renders a call's decoded arguments (strictjson's tree) for the
// person who approves it, with the notes that go with them; every detector
// is on, as for the debug log. The JSON is the arguments' with keys
// sorted; it is not capped (arguments are, before they get here).
func (s *Sanitizer) Review(tool string, args any) (json.RawMessage, []ReviewNote) {
	r := reviewer{d: s.policyByName(tool).log}
	r.value(args, "", nameNone)
	return r.out, r.notes
}

// reviewer writes the approver's view of a tree.
type reviewer struct {
	d     *detector
	out   []byte
	notes []ReviewNote
	raw   []finding
}

// value writes v, under a member whose name says nk about it.
func (r *reviewer) value(v any, ptr string, nk nameKind) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.out = append(r.out, '{')
		for i, k := range keys {
			if i > 0 {
				r.out = append(r.out, ',')
			}
			p := ptr + "/" + tools.PointerToken(k)
			r.str(k, p, nameNone, true)
			r.out = append(r.out, ':')
			r.value(v[k], p, classifyName(k))
		}
		r.out = append(r.out, '}')
	case []any:
		r.out = append(r.out, '[')
		for i, e := range v {
			if i > 0 {
				r.out = append(r.out, ',')
			}
			r.value(e, ptr+"/"+strconv.Itoa(i), nameNone)
		}
		r.out = append(r.out, ']')
	case string:
		r.str(v, ptr, nk, false)
	case json.Number:
		r.number(string(v), ptr, nk)
	default:
		b, _ := json.Marshal(v)
		r.out = append(r.out, b...)
	}
}

// number writes a number; a card number, or one under a sensitive name,
// is redacted as the output sanitizer redacts it.
func (r *reviewer) number(num, ptr string, nk nameKind) {
	k, found := keyRule(r.d, nk, num)
	if !found && r.d.on[kCard] && 13 <= len(num) && len(num) <= 19 && run(num, 0, cDigit, 19) == len(num) && validCard([]byte(num)) {
		k, found = kCard, true
	}
	if !found {
		r.out = append(r.out, num...)
		return
	}
	r.out = appendReviewString(r.out, markerPrefix+r.d.kinds[k].name+"]")
	r.notes = append(r.notes, ReviewNote{Pointer: ptr, Secrets: []ReviewSpan{{Kind: r.d.kinds[k].name, Line: 1, Column: 1, Length: len(num)}}})
}

// str writes a string as the approver sees it, and its note.
func (r *reviewer) str(s, ptr string, nk nameKind, key bool) {
	n := ReviewNote{Pointer: ptr, Key: key}
	shown := r.redact(s, nk, &n)
	if lines := strings.Count(s, "\n"); lines > 0 {
		n.Lines = lines + 1
		if strings.HasSuffix(s, "\n") {
			n.Lines-- // a final newline ends the last line
		}
	}
	n.FormatChars = formatChars(s, &n.More)
	r.out = appendReviewString(r.out, shown)
	if n.Lines > 1 || len(n.Secrets)+len(n.Shown)+len(n.FormatChars) > 0 {
		r.notes = append(r.notes, n)
	}
}

// redact returns s with its real secrets redacted, noting them and the
// look-alikes it leaves in n.
func (r *reviewer) redact(s string, nk nameKind, n *ReviewNote) string {
	var pos positions
	if k, ok := keyRule(r.d, nk, s); ok {
		why := lookalike(k, s)
		if why == "" {
			n.Secrets = append(n.Secrets, pos.span(s, 0, len(s), r.d.kinds[k].name, ""))
			return markerPrefix + r.d.kinds[k].name + "]"
		}
		n.Shown = append(n.Shown, pos.span(s, 0, len(s), r.d.kinds[k].name, why))
	}
	if r.d.none() || s == "" {
		return s
	}
	r.raw, _ = r.d.scanAll(s, false, r.raw[:0], true)
	kept := r.raw[:0:0]
	type alike struct {
		f   finding
		why string
	}
	var alikes []alike
	for _, f := range r.raw {
		if why := lookalike(f.kind, s[f.start:f.end]); why != "" {
			alikes = append(alikes, alike{f, why})
		} else {
			kept = append(kept, f)
		}
	}
	kept = r.d.merge(s, kept)
	slices.SortFunc(alikes, func(a, b alike) int { return a.f.start - b.f.start })
	var shownPos positions
	for _, a := range alikes {
		v := s[a.f.start:a.f.end]
		if _, allowed := r.d.allow[v]; allowed || strings.HasPrefix(v, markerPrefix) {
			continue
		}
		if len(n.Shown) == maxNoted {
			n.More++
			continue
		}
		n.Shown = append(n.Shown, shownPos.span(s, a.f.start, a.f.end, r.d.kinds[a.f.kind].name, a.why))
	}
	for _, f := range kept {
		if len(n.Secrets) == maxNoted {
			n.More++
			continue
		}
		n.Secrets = append(n.Secrets, pos.span(s, f.start, f.end, r.d.kinds[f.kind].name, ""))
	}
	if len(kept) == 0 {
		return s
	}
	return string(r.d.apply(nil, s, kept, nil))
}

// lookalike says why a finding of kind k over v only looks like a secret
// and is shown to an approver: "" when it is one (or may be: what cannot be
// told from a secret stays redacted).
func lookalike(k kindID, v string) string {
	switch k {
	case kPrivateKey, kGCPServiceAccount:
		if strings.HasPrefix(v, "-----BEGIN") && !keyBlock(v) {
			return "a key block toold cannot check is a key (not one, or encrypted): shown, so that nothing can hide in it"
		}
	case kPassword, kSecret, kAWSSecretKey, kAzureStorageKey, kBasicAuth, kURLPassword:
		if commandLike(v) {
			return "the value is a command, not a secret: shown"
		}
	}
	return ""
}

// commandLike reports whether a shell would take v for more than one
// plain word: a substitution, a pipe, a list, a redirection. A password
// holding one of these is shown to the approver too, which is the price
// of never hiding a command from them.
func commandLike(v string) bool {
	return strings.Contains(v, "$(") || strings.Contains(v, "${") || strings.ContainsAny(v, "`|;&<>\n")
}

// positions turns byte offsets of one string into lines and columns,
// walking forward only: offsets asked in increasing order cost one pass.
type positions struct {
	at, line, col int // byte offset, and its line and column (from 0)
}

func (p *positions) to(s string, i int) (line, col int) {
	if i < p.at {
		*p = positions{}
	}
	for p.at < i {
		r, size := utf8.DecodeRuneInString(s[p.at:])
		if r == '\n' {
			p.line, p.col = p.line+1, 0
		} else {
			p.col++
		}
		p.at += size
	}
	return p.line + 1, p.col + 1
}

// span notes s[a:b] as a finding of kind.
func (p *positions) span(s string, a, b int, kind, why string) ReviewSpan {
	line, col := p.to(s, a)
	sp := ReviewSpan{Kind: kind, Line: line, Column: col, Length: utf8.RuneCountInString(s[a:b]), Why: why}
	if nl := strings.Count(s[a:b], "\n"); nl > 0 {
		sp.EndLine = line + nl
	}
	return sp
}

// formatChar reports characters that render as nothing, or reorder what
// follows: Unicode's format characters (Cf: bidi controls, zero-width
// characters, tags…), the invisible ones the views remove, variation
// selectors, line and paragraph separators, and the Hangul fillers.
func formatChar(r rune) bool {
	switch {
	case r < 0x80:
		return false
	case invisible(r), unicode.Is(unicode.Cf, r), r == 0x2028, r == 0x2029:
		return true
	case r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, r == 0x180E:
		return true
	case 0xE0100 <= r && r <= 0xE01EF: // variation selectors supplement
		return true
	}
	return false
}

// formatChars lists the format characters of s (maxNoted at most, the
// rest counted in more).
func formatChars(s string, more *int) []FormatChar {
	var out []FormatChar
	var pos positions
	for i, r := range s {
		if !formatChar(r) {
			continue
		}
		if len(out) == maxNoted {
			*more++
			continue
		}
		line, col := pos.to(s, i)
		out = append(out, FormatChar{Code: fmt.Sprintf("U+%04X", r), Name: formatName(r), Line: line, Column: col})
	}
	return out
}

// formatName names the format characters an approver is likely to meet.
func formatName(r rune) string {
	if n, ok := formatNames[r]; ok {
		return n
	}
	if 0x202A <= r && r <= 0x202E || 0x2066 <= r && r <= 0x2069 {
		return "bidirectional control"
	}
	if 0xE0000 <= r && r <= 0xE007F {
		return "tag character"
	}
	return "invisible format character"
}

var formatNames = map[rune]string{
	0x00AD: "soft hyphen", 0x061C: "arabic letter mark", 0x180E: "mongolian vowel separator",
	0x200B: "zero width space", 0x200C: "zero width non-joiner", 0x200D: "zero width joiner",
	0x200E: "left-to-right mark", 0x200F: "right-to-left mark", 0x2028: "line separator", 0x2029: "paragraph separator",
	0x202A: "left-to-right embedding", 0x202B: "right-to-left embedding", 0x202C: "pop directional formatting",
	0x202D: "left-to-right override", 0x202E: "right-to-left override", 0x2060: "word joiner",
	0x2066: "left-to-right isolate", 0x2067: "right-to-left isolate", 0x2068: "first strong isolate",
	0x2069: "pop directional isolate", 0xFEFF: "zero width no-break space (BOM)",
	0x115F: "hangul choseong filler", 0x1160: "hangul jungseong filler", 0x3164: "hangul filler", 0xFFA0: "halfwidth hangul filler",
}

// appendReviewString appends s as a JSON string whose text shows every
// format character as its \u escape (a surrogate pair past U+FFFF), so
// that no terminal or page that prints the JSON reorders or hides it.
func appendReviewString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	u := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', hex[r>>12&15], hex[r>>8&15], hex[r>>4&15], hex[r&15])
	}
	dst = append(dst, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			dst = append(dst, '\\', byte(r))
		case r == '\n':
			dst = append(dst, '\\', 'n')
		case r == '\t':
			dst = append(dst, '\\', 't')
		case r == '\r':
			dst = append(dst, '\\', 'r')
		case r < 0x20:
			dst = u(dst, r)
		case r < 0x80:
			dst = append(dst, byte(r))
		case !formatChar(r):
			dst = utf8.AppendRune(dst, r)
		case r > 0xFFFF:
			dst = u(u(dst, (r-0x10000)>>10+0xD800), (r-0x10000)&0x3FF+0xDC00)
		default:
			dst = u(dst, r)
		}
	}
	return append(dst, '"')
}
