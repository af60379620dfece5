package command

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitWords(t *testing.T) {
	ok := []struct {
		in   string
		want []string
	}{
		{"ls -la", []string{"ls", "-la"}},
		{"  grep  -n\t'a b'  x.go ", []string{"grep", "-n", "a b", "x.go"}},
		{`echo "a \"q\" \$HOME \\ b"`, []string{"echo", `a "q" $HOME \ b`}},
		{`echo 'it'\''s'`, []string{"echo", "it's"}},
		{`echo a\ b`, []string{"echo", "a b"}},
		{`echo ''`, []string{"echo", ""}},
		{`echo '; id' '$(id)' '|' '*'`, []string{"echo", "; id", "$(id)", "|", "*"}},
		{"echo a\\\nb", []string{"echo", "ab"}},
		{`echo a#b`, []string{"echo", "a#b"}},
		{`echo "a\nb"`, []string{"echo", `a\nb`}},
	}
	for _, c := range ok {
		got, err := splitWords(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
	refused := []string{"ls; id", "ls | wc", "ls && id", "echo $(id)", "echo `id`", "echo $HOME", `echo "$HOME"`,
		"ls\nid", "cat < f", "echo > f", "ls *.go", "echo ~", "# c", "'open", `"open`, `a\`, "", "   ", "(ls)", "ls &"}
	for _, in := range refused {
		if got, err := splitWords(in); err == nil {
			t.Errorf("%q: split into %q, want a refusal", in, got)
		}
	}
}

// FuzzSplitWords: the splitter never panics, and a split is stable: the
// words quoted back split into the same words.
func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{"ls -la", `a "b c" 'd'`, `x\ y`, "a;b", "$(id)", `"a\"b"`, "'", `\`, "a\\\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = quoteWord(w)
		}
		again, err := splitWords(strings.Join(quoted, " "))
		if err != nil {
			t.Fatalf("%q -> %q: requoted form refused: %v", s, words, err)
		}
		if diff := cmp.Diff(words, again); diff != "" {
			t.Fatalf("%q (-first +second):\n%s", s, diff)
		}
	})
}
