package fs

import (
	"bytes"
	"context"
	"unicode/utf8"

	"github.com/toold/toold/internal/tools"
)

type editArgs struct {
	Path                string `json:"path" desc:"File to edit, relative to the workspace root." validate:"min=1"`
	OldString           string `json:"old_string" desc:"Exact text to replace, byte for byte with its whitespace and indentation, without read_file's line-number prefixes." validate:"min=1"`
	NewString           string `json:"new_string" desc:"Text to put in its place; empty deletes old_string."`
	ExpectedOccurrences int    `json:"expected_occurrences,omitempty" default:"1" desc:"How many times old_string occurs; the edit is refused if the count differs. All occurrences are replaced." validate:"omitempty,min=1"`
	ExpectedSHA256      string `json:"expected_sha256" desc:"Hex SHA-256 of the file's current content, as read_file returned it." validate:"len=64,hexadecimal"`
}

type editResult struct {
	Path         string `json:"path" desc:"The file edited, relative to the workspace root."`
	Replacements int    `json:"replacements" desc:"Occurrences replaced."`
	SHA256       string `json:"sha256" desc:"Hex SHA-256 of the new content; pass it to the next edit."`
}

func (w *Workspace) editFileTool() tools.Tool {
	return tools.Typed(tools.Spec{
		Name:         "edit_file",
		Confirmation: w.writeConfirmation(),
		Title:        "Edit a file",
		Effects:      tools.Effects{Destructive: true},
		Category:     tools.Direct,
		Description:  "Change a text file in the workspace by replacing exact occurrences of a string.",
		Instructions: "Use edit_file for targeted changes to a file you have read: copy old_string exactly " +
			"from read_file's content (without the line number and tab in front of each line), with enough " +
			"surrounding lines to be unique. Pass the file's sha256 from read_file as expected_sha256; if the " +
			"file changed since, the edit is refused with code conflict and you must read it again. Every " +
			"occurrence is replaced, and the count must equal expected_occurrences (default 1), so a snippet " +
			"that appears more often than you thought is refused instead of changing the wrong place. Chain " +
			"several edits by passing each result's sha256 to the next. To rewrite most of a file, use write_file. " +
			"Files other tools execute (under .git, and those the operator protected) are refused with code protected_path.",
		Returns: "path, replacements made, and sha256 of the new content.",
		Examples: []tools.Example{
			{Description: "rename a function call", Arguments: []byte(`{"path":"src/main.go","old_string":"\tlog.Print(msg)\n","new_string":"\tlogger.Info(msg)\n","expected_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`)},
			{Description: "replace every occurrence of a constant", Arguments: []byte(`{"path":"config.yaml","old_string":"timeout: 5s","new_string":"timeout: 10s","expected_occurrences":3,"expected_sha256":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}`)},
		},
	}, w.editFile)
}

func (w *Workspace) editFile(ctx context.Context, _ *tools.Call, in editArgs) (editResult, error) {
	rel, err := w.writablePath(in.Path, 0)
	if err != nil {
		return editResult{}, err
	}
	if in.OldString == in.NewString {
		return editResult{}, tools.NewUserError("old_string and new_string are the same, so the edit would change nothing").
			WithCode(tools.CodeNoChange).WithSuggestion("put the replacement text in new_string")
	}
	unlock, err := w.lockFor(rel)
	if err != nil {
		return editResult{}, err
	}
	defer unlock()
	cur, err := w.inspect(rel, true)
	switch {
	case err != nil:
		return editResult{}, err
	case !cur.exists:
		return editResult{}, w.notFound(rel)
	}
	if err := checkExpected(rel, cur, in.ExpectedSHA256); err != nil {
		return editResult{}, err
	}
	if bytes.IndexByte(cur.data[:min(len(cur.data), binarySniffBytes)], 0) >= 0 || !utf8.Valid(cur.data) {
		return editResult{}, tools.NewUserError("%s looks like a binary file; edit_file changes text files only", show(rel)).
			WithCode(tools.CodeBinaryFile).WithSuggestion("pick a text file")
	}
	want := max(in.ExpectedOccurrences, 1)
	old := []byte(in.OldString)
	at := occurrences(cur.data, old, w.secretSpans(cur.data))
	if len(at) != want {
		return editResult{}, occurrenceMismatch(rel, len(at), want, bytes.Contains(old, []byte(redactedMarker)))
	}
	data := replaceAt(cur.data, at, len(old), []byte(in.NewString))
	if _, err := w.writablePath(rel, len(data)); err != nil {
		return editResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return editResult{}, err
	}
	if err := w.replaceFile(rel, data, cur.perm); err != nil {
		return editResult{}, err
	}
	return editResult{Path: rel, Replacements: want, SHA256: w.versionOf(data)}, nil
}

func occurrenceMismatch(rel string, found, want int, marker bool) error {
	e := tools.NewUserError("old_string occurs %d time(s) in %s, but expected_occurrences is %d; nothing was changed", found, show(rel), want).
		WithCode(tools.CodeOccurrenceMismatch)
	if found == 0 && marker {
		return e.WithSuggestion("old_string holds a redaction marker: the secret it hides cannot be matched or replaced " +
			"by edit_file; edit the text before or after it instead")
	}
	if found == 0 {
		return e.WithSuggestion("copy old_string exactly from read_file's content, without the line-number prefix and tab, " +
			"with the same whitespace and indentation")
	}
	return e.WithSuggestion("add surrounding lines to old_string until it is unique, or set expected_occurrences to %d to replace them all", found)
}

// A secret in the file is never matched by old_string, whole or in part:
// otherwise edit_file is an oracle, as grep was (issue 16, finding 7) —
// "occurs 1 time" against "occurs 0 times" tells a caller that never saw
// the secret (read_file and grep show it redacted) whether a guess of its
// next character is right. An edit works on the text as the caller sees
// it: a match that touches a secret does not count, so a right guess and
// a wrong one get the same answer, and the secret stays where it is when
// the text around it is edited.

// secretSpans are the byte ranges of data that the output sanitizer would
// redact (nil without a redactor): for each line that the line redactor
// changes, the part between the longest common prefix and suffix of the
// line and its redacted form — widened to whole markers, should a secret
// begin or end with the same bytes as its marker ("[RE…", "…n]"), so the
// span always covers the secret whole.
func (w *Workspace) secretSpans(data []byte) [][2]int {
	if w.opts.Redactor == nil {
		return nil
	}
	red := w.opts.Redactor().Lines(data)
	if bytes.Equal(red, data) {
		return nil
	}
	var spans [][2]int
	off := 0
	for len(data) > 0 && len(red) > 0 {
		raw, rest := cutLine(data)
		got, redRest := cutLine(red)
		if !bytes.Equal(raw, got) {
			marker := []byte(redactedMarker)
			p := commonPrefix(raw, got)
			if i := bytes.LastIndex(got[:min(p+len(marker), len(got))], marker); i >= 0 && i < p {
				p = i // the secret began with the marker's first bytes
			}
			q := commonSuffix(raw[p:], got[p:])
			if e := len(got) - q; e > p {
				if j := bytes.IndexByte(got[e-1:], ']'); j > 0 {
					q = max(q-j, 0) // it ended with the marker's last bytes
				}
			}
			spans = append(spans, [2]int{off + p, off + len(raw) - q})
		}
		off += len(raw)
		data, red = rest, redRest
	}
	return spans
}

// cutLine splits b after its first line break (or at its end).
func cutLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1], b[i+1:]
	}
	return b, nil
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

// occurrences are the starts of old's non-overlapping occurrences in data,
// left to right, leaving out every one that touches a span (a secret).
func occurrences(data, old []byte, spans [][2]int) []int {
	var at []int
	for i := 0; i <= len(data)-len(old); {
		j := bytes.Index(data[i:], old)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(old)
		if touches(start, end, spans) {
			i = start + 1
			continue
		}
		at = append(at, start)
		i = end
	}
	return at
}

func touches(start, end int, spans [][2]int) bool {
	for _, s := range spans {
		if start < s[1] && s[0] < end {
			return true
		}
	}
	return false
}

// replaceAt replaces the n bytes at each of at (ascending, not
// overlapping) with repl.
func replaceAt(data []byte, at []int, n int, repl []byte) []byte {
	out := make([]byte, 0, len(data)+len(at)*(len(repl)-n))
	prev := 0
	for _, i := range at {
		out = append(append(out, data[prev:i]...), repl...)
		prev = i + n
	}
	return append(out, data[prev:]...)
}
