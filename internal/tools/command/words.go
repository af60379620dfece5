package command

import (
	"strings"

	"github.com/toold/toold/internal/tools"
)

// splitWords splits execute_command's string form into argv with POSIX
// shell quoting rules: blanks separate words, '...' is literal, "..."
// allows \" \\ \$ \` escapes, a backslash outside quotes escapes the next
// character. No shell runs, so nothing is expanded; because a caller
// writing `ls | wc` or `echo $HOME` expects a shell, every construct a shell
// would treat specially (operators, expansions, globs, comments, a newline
// that would start a second command) is refused with a clear error instead
// of being passed on silently as a literal. Quoting such a character passes
// it literally.
func splitWords(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	end := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			end()
		case c == '\\':
			if i+1 >= len(s) {
				return nil, shellError("the command ends with a lone backslash")
			}
			i++
			if s[i] == '\n' { // line continuation
				continue
			}
			cur.WriteByte(s[i])
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, shellError("a single quote is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			n, err := doubleQuoted(s[i+1:], &cur)
			if err != nil {
				return nil, err
			}
			i += n
			inWord = true
		case strings.IndexByte("|&;<>()", c) >= 0:
			return nil, shellError("%q is a shell operator; no shell runs here (one program per call, no pipes, redirections or command lists)", string(c))
		case c == '$' || c == '`':
			return nil, shellError("%q would be a shell expansion; no shell runs here, so nothing is expanded (quote it with '...' to pass it literally)", string(c))
		case c == '\n' || c == '\r':
			return nil, shellError("a newline would start a second command; run one program per call")
		case strings.IndexByte("*?[", c) >= 0:
			return nil, shellError("%q would be a glob; no shell expands it (list the files, or quote it to pass it literally)", string(c))
		case (c == '#' || c == '~') && !inWord:
			return nil, shellError("%q at the start of a word means something to a shell; quote it to pass it literally", string(c))
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	if len(words) == 0 {
		return nil, shellError("the command is empty")
	}
	return words, nil
}

// doubleQuoted copies the inside of "..." (s starts after the opening
// quote) and returns how many bytes it consumed, the closing quote included
// minus one.
func doubleQuoted(s string, cur *strings.Builder) (int, error) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return i + 1, nil
		case '\\':
			if i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
				continue
			}
			cur.WriteByte(c)
		case '$', '`':
			return 0, shellError("%q inside \"...\" would be expanded by a shell; use '...' to pass it literally", string(c))
		default:
			cur.WriteByte(c)
		}
	}
	return 0, shellError("a double quote is not closed")
}

func shellError(format string, args ...any) *tools.Error {
	return tools.Errorf(tools.UserError, format, args...).WithCode(tools.CodeShellSyntax).
		WithSuggestion("send \"command\" as an array of arguments to avoid quoting, e.g. [\"grep\", \"-n\", \"a b\", \"file.go\"]")
}

// quoteWord quotes w so splitWords reads it back unchanged (tests, logs).
func quoteWord(w string) string {
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
