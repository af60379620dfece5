package search

import (
	"regexp"
	"strings"
	"unicode"
)

// A query, read before its words are matched: what it asks for, what it
// says it does not want ("a meeting, not an incident"), and the values it
// quotes (#incidents, PROJ-42, "Q3 plan", reports/q3.csv), whose words
// name the things a tool acts on rather than what the tool does.
type parsedQuery struct {
	// text is what the query asks for: the query without its negated
	// parts and its quoted values.
	text string
	// values are the words of the quoted values; negated the words of the
	// negated parts.
	values, negated string
	// hints are the words the values' shapes imply (see hints).
	hints []string
}

// negationCue opens a negated part: it runs to the end of the clause.
// "won't", "can't" and "isn't" are left out: "why won't my pod start"
// asks about the pod, it does not exclude it.
var negationCue = regexp.MustCompile(`(?i)(?:^|[^\pL\pN])(not|never|without|instead of|rather than|except|don['’]?t|do not|no longer)(?:[^\pL\pN]|$)`)

// clauseEnd ends a negated part.
var clauseEnd = regexp.MustCompile(`(?i)[,.;:!?()]|(?:^|[^\pL\pN])(?:but|and|then|so|while)(?:[^\pL\pN]|$)`)

// maxNegated bounds the words a negation takes: past a few, the clause is
// more likely a description than an exclusion.
const maxNegated = 4

// parseQuery reads a query. It is linear in the query's length.
func parseQuery(q string) parsedQuery {
	var p parsedQuery
	var text, negated strings.Builder
	rest := q
	for rest != "" {
		loc := negationCue.FindStringSubmatchIndex(rest)
		if loc == nil {
			text.WriteString(rest)
			break
		}
		text.WriteString(rest[:loc[2]])
		text.WriteByte(' ')
		after := rest[loc[3]:]
		end := len(after)
		if e := clauseEnd.FindStringIndex(after); e != nil {
			end = e[0]
		}
		scope := after[:end]
		if len(strings.Fields(scope)) > maxNegated+2 {
			text.WriteString(scope) // a long clause describes more than it excludes
		} else {
			negated.WriteString(scope)
			negated.WriteByte(' ')
		}
		rest = after[end:]
	}
	p.negated = negated.String()
	p.text, p.values, p.hints = quotedValues(text.String())
	return p
}

// quotedValues separates from text the values it quotes: #channels and
// @mentions, quoted strings, e-mail addresses, URLs, paths and file
// names, and keys such as PROJ-42. It returns the rest, the values' words
// and the hints of their shapes.
func quotedValues(text string) (rest, values string, hints []string) {
	var r, v strings.Builder
	for _, seg := range splitQuotes(text) {
		if seg.quoted {
			v.WriteString(seg.s)
			v.WriteByte(' ')
			continue
		}
		for _, f := range strings.Fields(seg.s) {
			t := strings.Trim(f, `,;:!?()[]{}`)
			switch h := valueHint(t); {
			case h != "":
				hints = append(hints, h)
				v.WriteString(t)
				v.WriteByte(' ')
			case isKey(t):
				v.WriteString(t)
				v.WriteByte(' ')
			default:
				r.WriteString(f)
				r.WriteByte(' ')
			}
		}
	}
	return r.String(), v.String(), hints
}

// valueHint is the word a value's shape implies, or "" for a word that is
// not a value: a URL means a link, an address e-mail, a path or file name
// a file, a #name a channel, an @name a user.
func valueHint(f string) string {
	switch {
	case len(f) < 2:
		return ""
	case strings.Contains(f, "://"):
		return "url"
	case strings.Contains(f, "@") && f[0] != '@' && strings.Contains(f[strings.IndexByte(f, '@'):], "."):
		return "email"
	case f[0] == '#' && isWordChars(f[1:]):
		return "channel"
	case f[0] == '@' && isWordChars(f[1:]):
		return "user"
	case isFileName(strings.TrimRight(f, ".")):
		return "file"
	}
	return ""
}

// isKey reports whether f is an identifier such as PROJ-42 or INC-7:
// capitals, a dash, digits.
func isKey(f string) bool {
	prefix, num, ok := strings.Cut(f, "-")
	if !ok || prefix == "" || num == "" {
		return false
	}
	for _, r := range prefix {
		if !unicode.IsUpper(r) {
			return false
		}
	}
	for _, r := range num {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

func isWordChars(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

type segment struct {
	s      string
	quoted bool
}

// splitQuotes cuts text at double quotes (straight or curly): odd
// segments are quoted. An unclosed quote quotes nothing.
func splitQuotes(text string) []segment {
	var out []segment
	quoted := false
	start := 0
	for i, r := range text {
		if r != '"' && r != '“' && r != '”' {
			continue
		}
		if !quoted && !strings.ContainsAny(text[i+len(string(r)):], "\"”") {
			break
		}
		out = append(out, segment{text[start:i], quoted})
		quoted = !quoted
		start = i + len(string(r))
	}
	return append(out, segment{text[start:], quoted})
}

// maxTypoLen bounds the length of a word checked for a misspelling.
const maxTypoLen = 32

// nearestTerm is the index term that a query's term (a word no tool and
// no word vector knows) misspells ("githib", "isues"): at most one edit
// away for a term of 4 to 7 letters, two for a longer one; of the nearest,
// the one most tools hold. It is "" when there is none.
func (ix *Index) nearestTerm(t string) string {
	if len(t) < 4 || len(t) > maxTypoLen || hasDigit(t) {
		return ""
	}
	limit := 1
	if len(t) > 7 {
		limit = 2
	}
	best, bestD, bestN := "", limit+1, 0
	for cand, ps := range ix.postings {
		if abs(len(cand)-len(t)) > limit || len(cand) > maxTypoLen+2 {
			continue
		}
		d := editDistance(t, cand, limit)
		if d < bestD || d == bestD && (len(ps) > bestN || len(ps) == bestN && cand < best) {
			best, bestD, bestN = cand, d, len(ps)
		}
	}
	if bestD > limit {
		return ""
	}
	return best
}

// editDistance is the edit distance of a and b (bytes, both at most
// maxTypoLen+2 long) counting an insertion, a deletion, a substitution or
// a swap of neighbours as one edit (the optimal string alignment
// distance), or limit+1 once it exceeds limit.
func editDistance(a, b string, limit int) int {
	var rows [3][maxTypoLen + 3]int
	pp, prev, cur := rows[0][:len(b)+1], rows[1][:len(b)+1], rows[2][:len(b)+1]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > limit {
			return limit + 1
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(b)]
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
