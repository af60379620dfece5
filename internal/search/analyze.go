package search

import (
	"cmp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// split says where words() splits camelCase.
type split int

const (
	// noCamel never splits a word at its case.
	noCamel split = iota
	// prose splits only words that start lower-case (getUser, listPRs):
	// in a sentence, "GitHub" and "PagerDuty" are names of one word.
	prose
	// identifier splits every word (an identifier's GetUser is two).
	identifier
)

// words splits text into lower-case words: at every character that is not
// a letter or digit (so snake_case, kebab-case, dotted and server__tool
// names come apart), and, as mode says, where a lower-case letter or
// digit meets an upper-case one (getUser, listPRs) or an acronym meets a
// word (HTTPServer -> http server). Letters and digits stay together
// (ec2, s3, k8s, oauth2 are names).
func words(text string, mode split) []string {
	var out []string
	start := -1
	camel := false
	var prev rune
	flush := func(end int) {
		if start >= 0 && end > start {
			out = append(out, strings.ToLower(text[start:end]))
		}
		start = -1
	}
	for i, r := range text {
		alnum := unicode.IsLetter(r) || unicode.IsDigit(r)
		switch {
		case !alnum:
			flush(i)
		case start < 0:
			start = i
			camel = mode == identifier || mode == prose && unicode.IsLower(r)
		case camel && unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)):
			flush(i)
			start = i
		case camel && unicode.IsLower(r) && unicode.IsUpper(prev) && i-start > utf8.RuneLen(prev) && !pluralAcronym(text, i):
			// "HTTPServer": the S starts the next word.
			p := i - utf8.RuneLen(prev)
			flush(p)
			start = p
		}
		prev = r
	}
	flush(len(text))
	return out
}

// pluralAcronym reports whether the lower-case letter at i is the plural
// s of an acronym ("PRs", "IDs", "VMs"): an s that ends the word.
func pluralAcronym(text string, i int) bool {
	if text[i] != 's' {
		return false
	}
	next, _ := utf8.DecodeRuneInString(text[i+1:])
	return i+1 == len(text) || !unicode.IsLetter(next) && !unicode.IsDigit(next)
}

// stopwords are dropped from queries and documents: English function
// words, and the filler of requests to an assistant ("please show me"),
// which names no tool.
var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and are as at be been but by can could do does for from had has have
		how i if in into is it its it's me my of on or our ours please should so some than that the their them
		then there these they this those to us was we were what when where which while who whom why will with
		would you your yours all any just also via using use used uses let lets want need needs get's i'm
		can't don't won't isn't`) {
		m[w] = true
	}
	return m
}()

// analyzer turns text into index terms: words, stop words dropped,
// optionally stemmed. It caches stems: a catalog's vocabulary is small and
// the same words recur in every tool.
type analyzer struct {
	stem  bool
	camel bool
	stems map[string]string
}

func newAnalyzer(o Options) *analyzer {
	return &analyzer{stem: o.Stem, camel: o.SplitNames, stems: map[string]string{}}
}

// terms analyses prose: each word, lower-cased, stop words dropped,
// stemmed.
func (a *analyzer) terms(text string) []string { return a.analyse(words(text, a.prose())) }

func (a *analyzer) prose() split {
	if a.camel {
		return prose
	}
	return noCamel
}

func (a *analyzer) analyse(ws []string) []string {
	out := ws[:0]
	for _, w := range ws {
		if stopwords[w] {
			continue
		}
		out = append(out, a.term(w))
	}
	return out
}

// identTerms analyses an identifier (a name, a parameter, an enum value):
// as terms, splitting every camelCase word.
func (a *analyzer) identTerms(text string) []string {
	mode := identifier
	if !a.camel {
		mode = noCamel
	}
	return a.analyse(words(text, mode))
}

// term is one word's index term.
func (a *analyzer) term(w string) string {
	if !a.stem {
		return w
	}
	if s, ok := a.stems[w]; ok {
		return s
	}
	s := w
	if len(w) > 3 && !hasDigit(w) {
		s = english.Stem(w, true)
	}
	a.stems[w] = s
	return s
}

// queryTerm is term for a word of a query: it reads the cache the index
// filled while it was built and never writes it, so concurrent searches
// share the analyzer.
func (a *analyzer) queryTerm(w string) string {
	if s, ok := a.stems[w]; ok || !a.stem {
		return cmp.Or(s, w)
	}
	if len(w) > 3 && !hasDigit(w) {
		return english.Stem(w, true)
	}
	return w
}

func hasDigit(s string) bool {
	return strings.IndexFunc(s, unicode.IsDigit) >= 0
}

// splitName separates a tool name's server part from the tool's own words:
// "github__list_issues" and "github.list_issues" are the tool list_issues
// of the server github. A name without either separator has no server
// part.
func splitName(name string) (server, tool string) {
	if s, t, ok := strings.Cut(name, "__"); ok && s != "" && t != "" {
		return s, t
	}
	if s, t, ok := strings.Cut(name, "."); ok && s != "" && t != "" {
		return s, t
	}
	return "", name
}

// hints are the words a query implies by the shape of what it quotes: a
// path or file name (reports/q3.csv, notes.md) is about a file, an
// address (x@example.com) about email, a URL about a link.
func hints(query string) []string {
	var out []string
	for _, f := range strings.Fields(query) {
		f = strings.Trim(f, `"'()[]{},;:!?`)
		switch {
		case strings.Contains(f, "://"):
			out = append(out, "url")
		case strings.Contains(f, "@") && strings.Contains(f[strings.IndexByte(f, '@'):], "."):
			out = append(out, "email")
		case isFileName(f):
			out = append(out, "file")
		}
	}
	return out
}

// isFileName reports whether f looks like a path or a file name with an
// extension: a slash between words, or a name, a dot and 1-4 letters.
func isFileName(f string) bool {
	if strings.Contains(strings.Trim(f, "/"), "/") {
		return true
	}
	dot := strings.LastIndexByte(f, '.')
	if dot <= 0 || len(f)-dot-1 < 1 || len(f)-dot-1 > 4 {
		return false
	}
	for _, r := range f[dot+1:] {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}
