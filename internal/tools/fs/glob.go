package fs

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Glob patterns are compiled to one RE2 regular expression per call, so
// matching a path costs time linear in the path whatever the pattern: a
// backtracking matcher (doublestar's) takes exponential time on patterns
// such as "{*,*}{*,*}...zz", and a 200-byte pattern pinned a tool and a core
// until restart. The syntax is doublestar's, which the tools document:
//
//   - any run of characters within one path component
//     ?       one character other than /
//     **      as a whole component: zero or more directories
//     [a-z]   a class; [!a] and [^a] negate it; it never matches /
//     {a,b}   alternatives, which may nest and hold /
//     \c      c itself
//
// "**" that is not a whole component ("a**b") is "*", as in doublestar.
// Three limits keep the compiled form small and the errors clear: at most
// maxGlobBytes, braces nested at most maxGlobDepth deep, and no "***".
const (
	maxGlobBytes = 1024
	maxGlobDepth = 10
)

// globError is why a pattern was refused, and what to write instead.
type globError struct {
	msg, hint string
}

func (e *globError) Error() string { return e.msg }

// globRegexp translates one cleaned pattern into the body of a regular
// expression (without anchors).
func globRegexp(pat string) (string, error) {
	if len(pat) > maxGlobBytes {
		return "", &globError{fmt.Sprintf("the pattern is %d bytes long; the limit is %d", len(pat), maxGlobBytes),
			"match fewer names per pattern, or pass several patterns"}
	}
	if !utf8.ValidString(pat) {
		return "", &globError{"the pattern is not valid UTF-8", "write the pattern as UTF-8 text"}
	}
	for moved := slashIntoGroups(pat); moved != pat; moved = slashIntoGroups(pat) {
		pat = moved // an inner group gets its "/" once the outer one has moved it in
	}
	var b strings.Builder
	depth := 0
	// atStart: the next character begins a path component (start of the
	// pattern, after "/", or at the start of a brace alternative whose
	// group began a component: groupAtStart keeps that, per open group).
	atStart := true
	var groupAtStart []bool
	for i := 0; i < len(pat); {
		c := pat[i]
		switch c {
		case '*':
			n := 1
			for i+n < len(pat) && pat[i+n] == '*' {
				n++
			}
			if n > 2 {
				return "", &globError{"the pattern has \"" + strings.Repeat("*", n) + "\"", "use * within a name or ** as a whole path component"}
			}
			i += n
			end := i == len(pat) || pat[i] == '/' || (depth > 0 && (pat[i] == ',' || pat[i] == '}') && groupEndsComponent(pat, i))
			if n == 1 || !atStart || !end {
				b.WriteString(`[^/]*`)
				atStart = false
				continue
			}
			if i < len(pat) && pat[i] == '/' {
				// "**/": zero or more directories, then what follows.
				b.WriteString(`(?:.*/)?`)
				i++
				atStart = true
				continue
			}
			b.WriteString(`.*`)
			atStart = false
		case '/':
			i++
			// "/**" closing the pattern or an alternative also matches the
			// directory itself, as in doublestar: "a/**" matches "a".
			if strings.HasPrefix(pat[i:], "**") {
				j := i + 2
				if j == len(pat) || (depth > 0 && (pat[j] == ',' || pat[j] == '}') && groupEndsComponent(pat, j)) {
					b.WriteString(`(?:/.*)?`)
					i = j
					atStart = false
					continue
				}
			}
			b.WriteByte('/')
			atStart = true
		case '?':
			b.WriteString(`[^/]`)
			i++
			atStart = false
		case '[':
			n, class, err := globClass(pat[i:])
			if err != nil {
				return "", err
			}
			b.WriteString(class)
			i += n
			atStart = false
		case '{':
			depth++
			if depth > maxGlobDepth {
				return "", &globError{fmt.Sprintf("the pattern nests braces more than %d deep", maxGlobDepth), "flatten the alternatives: {a,b,c} instead of {a,{b,{c}}}"}
			}
			if i+1 < len(pat) && pat[i+1] == '}' {
				return "", &globError{"the pattern has empty braces {}", "list the alternatives, such as {go,md}, or remove the braces"}
			}
			b.WriteString(`(?:`)
			i++
			groupAtStart = append(groupAtStart, atStart)
		case '}':
			if depth == 0 {
				return "", &globError{"the pattern has a } without its {", `write \} for a literal brace`}
			}
			depth--
			groupAtStart = groupAtStart[:depth]
			b.WriteByte(')')
			i++
			atStart = false
		case ',':
			if depth > 0 {
				b.WriteByte('|')
				atStart = groupAtStart[depth-1]
			} else {
				b.WriteByte(',')
				atStart = false
			}
			i++
		case '\\':
			if i+1 == len(pat) {
				return "", &globError{"the pattern ends in a lone backslash", `write \\ for a literal backslash`}
			}
			r, size := utf8.DecodeRuneInString(pat[i+1:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += 1 + size
			atStart = false
		default:
			r, size := utf8.DecodeRuneInString(pat[i:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			i += size
			atStart = false
		}
	}
	if depth != 0 {
		return "", &globError{"the pattern has a { without its }", `close the alternatives with }, or write \{ for a literal brace`}
	}
	return b.String(), nil
}

// slashIntoGroups moves a "/" that follows a brace group into each of its
// alternatives ("{a,**}/x" is "{a/,**/}x"), so that an alternative "**"
// followed by "/" reads as "**/", zero or more directories, as doublestar
// reads it ("{**}/*" matches "0").
func slashIntoGroups(pat string) string {
	if !strings.Contains(pat, "}/") {
		return pat
	}
	var b strings.Builder
	var opens []int // where each open group's alternatives begin in b
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		switch {
		case c == '\\' && i+1 < len(pat):
			b.WriteString(pat[i : i+2])
			i++
			continue
		case c == '{':
			b.WriteByte(c)
			opens = append(opens, b.Len())
			continue
		case c == '}' && len(opens) > 0 && i+1 < len(pat) && pat[i+1] == '/':
			start := opens[len(opens)-1]
			opens = opens[:len(opens)-1]
			inner := b.String()[start:]
			rest := b.String()[:start]
			b.Reset()
			b.WriteString(rest)
			b.WriteString(addToAlternatives(inner, "/"))
			b.WriteByte('}')
			i++ // the "/" is inside now
			continue
		case c == '}' && len(opens) > 0:
			opens = opens[:len(opens)-1]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// addToAlternatives appends suffix to each top-level alternative of inner
// (a group's text between its braces).
func addToAlternatives(inner, suffix string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\' && i+1 < len(inner):
			b.WriteString(inner[i : i+2])
			i++
			continue
		case c == '{':
			depth++
		case c == '}':
			depth--
		case c == ',' && depth == 0:
			b.WriteString(suffix)
		}
		b.WriteByte(c)
	}
	b.WriteString(suffix)
	return b.String()
}

// groupEndsComponent reports whether the brace group in which pat[i] ends
// an alternative (pat[i] is "," or "}") ends a path component: what follows
// its closing "}" is the end of the pattern or "/", or the end of an outer
// group that does. "**" is a whole component only then ("{a,**}/x"), and
// like "*" otherwise ("{**}x").
func groupEndsComponent(pat string, i int) bool {
	nested := 0
	for ; i < len(pat); i++ {
		switch pat[i] {
		case '\\':
			i++
		case '{':
			nested++
		case '}':
			if nested > 0 {
				nested--
				continue
			}
			j := i + 1
			switch {
			case j == len(pat) || pat[j] == '/':
				return true
			case pat[j] == ',' || pat[j] == '}':
				return groupEndsComponent(pat, j)
			}
			return false
		}
	}
	return false
}

// globClass translates the class at the start of s ("[...]") and returns
// how many bytes it used.
func globClass(s string) (int, string, error) {
	var b strings.Builder
	b.WriteByte('[')
	i := 1
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		b.WriteByte('^')
		i++
	}
	items := 0
	for i < len(s) && s[i] != ']' {
		lo, n, err := classRune(s[i:])
		if err != nil {
			return 0, "", err
		}
		i += n
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			hi, n, err = classRune(s[i+1:])
			if err != nil {
				return 0, "", err
			}
			i += 1 + n
			if hi < lo {
				return 0, "", &globError{fmt.Sprintf("the class range %c-%c runs backwards", lo, hi), fmt.Sprintf("write %c-%c", hi, lo)}
			}
		}
		if lo <= '/' && '/' <= hi {
			return 0, "", &globError{"a [...] class in the pattern holds /, which never matches within a name", "use {a,b} alternatives to match across directories"}
		}
		fmt.Fprintf(&b, `\x{%x}`, lo)
		if hi != lo {
			fmt.Fprintf(&b, `-\x{%x}`, hi)
		}
		items++
	}
	if i == len(s) {
		return 0, "", &globError{"the pattern has a [ without its ]", `close the class with ], or write \[ for a literal bracket`}
	}
	if items == 0 {
		return 0, "", &globError{"the pattern has an empty class []", "list the characters, such as [abc], or remove the brackets"}
	}
	if b.String()[1] == '^' {
		b.WriteString(`/`) // a negated class still never matches /
	}
	b.WriteByte(']')
	return i + 1, b.String(), nil
}

// classRune reads one character of a class, honouring a backslash escape.
func classRune(s string) (rune, int, error) {
	n := 0
	if s[0] == '\\' {
		if len(s) == 1 {
			return 0, 0, &globError{"the pattern ends in a lone backslash", `write \\ for a literal backslash`}
		}
		n = 1
	}
	r, size := utf8.DecodeRuneInString(s[n:])
	return r, n + size, nil
}
