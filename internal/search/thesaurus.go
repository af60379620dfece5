package search

import (
	_ "embed"
	"strings"
	"sync"
)

//go:generate go run gen_wordnet.go

// domainText is toold's own thesaurus (see thesaurus.txt).
//
//go:embed thesaurus.txt
var domainText string

// wordnetText is the synonym table generated from WordNet 3.0.
//
//go:embed wordnet.txt
var wordnetText string

// thesaurus relates index terms: related terms stand for each other at a
// lower weight; an expansion replaces a term (an abbreviation) with the
// terms a tool would use, at full weight.
type thesaurus struct {
	related map[string][]string
	general map[string][]string // WordNet's, weighted lower still
	expand  map[string][]string
	// phrases expand a phrase ("money back", "spin up"), by its terms
	// joined with spaces; phraseLen is the longest.
	phrases   map[string][]string
	phraseLen int
}

// thesauri holds the parsed tables, once for stemmed and once for plain
// terms: read-only after they are built, shared by every index.
var thesauri = [2]func() *thesaurus{
	sync.OnceValue(func() *thesaurus { return parseThesaurus(false) }),
	sync.OnceValue(func() *thesaurus { return parseThesaurus(true) }),
}

func thesaurusFor(stem bool) *thesaurus {
	if stem {
		return thesauri[1]()
	}
	return thesauri[0]()
}

func parseThesaurus(stem bool) *thesaurus {
	a := &analyzer{stem: stem, stems: map[string]string{}}
	th := &thesaurus{related: map[string][]string{}, general: map[string][]string{}, expand: map[string][]string{},
		phrases: map[string][]string{}}
	for line := range strings.Lines(domainText) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if from, to, ok := strings.Cut(line, "=>"); ok {
			th.addExpansion(a, from, to)
			continue
		}
		var group []string
		for _, w := range strings.Fields(line) {
			if t := single(a, w); t != "" {
				group = appendNew(group, t)
			}
		}
		for _, t := range group {
			for _, o := range group {
				if o != t {
					th.related[t] = appendNew(th.related[t], o)
				}
			}
		}
	}
	for line := range strings.Lines(wordnetText) {
		fs := strings.Fields(line)
		if len(fs) < 2 || fs[0][0] == '#' {
			continue
		}
		k := a.term(fs[0])
		for _, w := range fs[1:] {
			if t := a.term(w); t != k {
				th.general[k] = appendNew(th.general[k], t)
			}
		}
	}
	return th
}

// addExpansion adds "from => to": from is a word or a phrase.
func (th *thesaurus) addExpansion(a *analyzer, from, to string) {
	ws := words(from, noCamel)
	if len(ws) == 1 {
		if k := single(a, from); k != "" {
			th.expand[k] = appendNew(th.expand[k], a.terms(to)...)
		}
		return
	}
	for i, w := range ws {
		ws[i] = a.term(w) // a phrase keeps its stop words: "on call", "look up"
	}
	k := strings.Join(ws, " ")
	th.phrases[k] = appendNew(th.phrases[k], a.terms(to)...)
	th.phraseLen = max(th.phraseLen, len(ws))
}

// phraseTerms returns the expansions of the phrases in a query's words
// (analysed, stop words kept).
func (th *thesaurus) phraseTerms(ws []string) []string {
	var out []string
	for i := range ws {
		for n := 2; n <= th.phraseLen && i+n <= len(ws); n++ {
			out = append(out, th.phrases[strings.Join(ws[i:i+n], " ")]...)
		}
	}
	return out
}

// single is the one term a word analyses to, or "" (a stop word, or a
// phrase such as "sign-off", which no single query word can match).
func single(a *analyzer, w string) string {
	ts := a.terms(w)
	if len(ts) != 1 {
		return ""
	}
	return ts[0]
}

func appendNew(list []string, ts ...string) []string {
	for _, t := range ts {
		if !contains(list, t) {
			list = append(list, t)
		}
	}
	return list
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
