package delegate

import (
	"strings"
)

// Challenge is one challenge of a WWW-Authenticate header (RFC 9110
// §11.6.1): its scheme, lower case, and its parameters, by lower-case name.
type Challenge struct {
	Scheme string
	Params map[string]string
}

// maxChallengeBytes bounds what ParseChallenges reads of a header; a
// longer one is cut (a server cannot make toold parse megabytes).
const maxChallengeBytes = 8 << 10

// ParseChallenges reads the challenges of WWW-Authenticate header values,
// in one pass over each (linear in its length): a scheme, then either a
// token68 or comma-separated name=value parameters whose values are
// tokens or quoted strings with backslash escapes. A malformed part ends
// its challenge; what was read before stays. It never fails: an
// unreadable header is no challenge.
func ParseChallenges(values []string) []Challenge {
	var out []Challenge
	for _, v := range values {
		if len(v) > maxChallengeBytes {
			v = v[:maxChallengeBytes]
		}
		out = append(out, parseHeader(v)...)
	}
	return out
}

// Bearer is the first Bearer challenge's parameters, or nil.
func Bearer(cs []Challenge) map[string]string {
	for _, c := range cs {
		if c.Scheme == "bearer" {
			return c.Params
		}
	}
	return nil
}

type lexer struct {
	s string
	i int
}

func (l *lexer) spaces() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t') {
		l.i++
	}
}

// token reads an RFC 9110 token (tchar*).
func (l *lexer) token() string {
	start := l.i
	for l.i < len(l.s) && tchar(l.s[l.i]) {
		l.i++
	}
	return l.s[start:l.i]
}

func tchar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// quoted reads a quoted-string after its opening quote; ok false when it
// does not end.
func (l *lexer) quoted() (string, bool) {
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		l.i++
		switch {
		case c == '"':
			return b.String(), true
		case c == '\\' && l.i < len(l.s):
			b.WriteByte(l.s[l.i])
			l.i++
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

// skipToComma moves past the next comma (or to the end): a malformed
// element is dropped whole.
func (l *lexer) skipToComma() {
	for l.i < len(l.s) && l.s[l.i] != ',' {
		if l.s[l.i] == '"' {
			l.i++
			if _, ok := l.quoted(); !ok {
				return
			}
			continue
		}
		l.i++
	}
}

func parseHeader(s string) []Challenge {
	l := &lexer{s: s}
	var out []Challenge
	var cur *Challenge
	for l.i < len(l.s) {
		l.spaces()
		if l.i < len(l.s) && l.s[l.i] == ',' {
			l.i++
			continue
		}
		start := l.i
		name := l.token()
		if name == "" {
			l.i++ // not a token: skip the byte
			l.skipToComma()
			continue
		}
		l.spaces()
		if l.i < len(l.s) && l.s[l.i] == '=' && cur != nil {
			// name=value: a parameter of the current challenge (unless
			// this is a token68 ending in '=': handled below).
			l.i++
			l.spaces()
			var value string
			if l.i < len(l.s) && l.s[l.i] == '"' {
				l.i++
				v, ok := l.quoted()
				if !ok {
					return append(out, *cur)
				}
				value = v
			} else {
				value = l.token()
			}
			key := strings.ToLower(name)
			if _, dup := cur.Params[key]; !dup && len(cur.Params) < 32 {
				cur.Params[key] = value
			}
			l.spaces()
			if l.i < len(l.s) && l.s[l.i] != ',' {
				l.skipToComma()
			}
			continue
		}
		// A new challenge: its scheme, then a token68 or parameters.
		if cur != nil {
			out = append(out, *cur)
		}
		l.i = start + len(name)
		cur = &Challenge{Scheme: strings.ToLower(name), Params: map[string]string{}}
		l.spaces()
		if l.i < len(l.s) && l.s[l.i] != ',' {
			// token68 or the first parameter: a parameter has '=' after
			// its name followed by something other than '=' or the end.
			p := l.i
			n := l.token()
			l.spaces()
			if n != "" && l.i < len(l.s) && l.s[l.i] == '=' && !token68Tail(l.s[l.i:]) {
				l.i = p // a parameter: the loop reads it
				continue
			}
			l.i = p
			l.skipToComma() // a token68: toold has no use for it
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	if len(out) > 16 {
		out = out[:16]
	}
	return out
}

// token68Tail reports whether what follows a name is a token68's padding:
// '='s up to a comma or the end.
func token68Tail(s string) bool {
	i := 0
	for i < len(s) && s[i] == '=' {
		i++
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i == len(s) || s[i] == ','
}
