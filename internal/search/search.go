// Package search finds the tools that best match a natural-language query
// among thousands: "which tool does X?". It ranks with BM25F — BM25 over
// several fields of a tool, each with its own weight and length
// normalisation — on terms that are split from names (snake_case,
// camelCase, server__tool), stemmed, and matched through a thesaurus
// (toold's own for the domain's words and abbreviations, then WordNet's
// synonyms at a lower weight). docs/search.md measures each of these.
//
// An Index is immutable and safe for concurrent use; the registry builds
// one per snapshot of its tools, so a search never sees half a list.
package search

import (
	"math"
	"slices"
	"sync"
	"unicode/utf8"
)

// Doc is what a tool is found by.
type Doc struct {
	// Name is the tool's name; a server part ("github__list_issues",
	// "github.list_issues") counts as the server's.
	Name string
	// Source names the upstream server that hosts the tool, if any.
	Source      string
	Title       string
	Description string
	Params      []Param
}

// Param is a parameter of a tool: its name, description and enum values.
type Param struct {
	Name        string
	Description string
	Enum        []string
}

// Fields of a document, in the order of Options.Weights.
const (
	fieldName = iota
	fieldServer
	fieldDescription
	fieldParamName
	fieldParamDescription
	fieldEnum
	numFields
)

// Options choose the techniques of the ranking; DefaultOptions are
// toold's, and the evaluator in bench/search turns each off to measure
// what it brings.
type Options struct {
	// SplitNames splits camelCase words: every one in a name, a
	// parameter or an enum value (getUserProfile), and in prose only
	// those that start lower-case ("GitHub" stays a name). snake_case and
	// server__tool always come apart at their punctuation.
	SplitNames bool
	// Stem reduces words to their stems (Snowball's English stemmer).
	Stem bool
	// Thesaurus matches the domain's related words and abbreviations.
	Thesaurus bool
	// WordNet matches WordNet's synonyms.
	WordNet bool
	// Params indexes parameter names and descriptions; Enums their enum
	// values.
	Params, Enums bool
	// Weights of the fields: name, server, description, parameter name,
	// parameter description, enum values.
	Weights [numFields]float64
	// B is each field's length normalisation, K1 the saturation of a
	// term's frequency.
	B  [numFields]float64
	K1 float64
	// ServerBoost multiplies by 1+ServerBoost the score of a tool whose
	// server the query names ("... in Jira"): a query that names a
	// product wants that product's tools, whatever its neighbours say.
	ServerBoost float64
	// Related and General weigh a match through the thesaurus's related
	// words and WordNet's synonyms against a match of the word itself.
	Related, General float64
	// ReadQuery reads a query before matching its words (see query.go):
	// the words of the values it quotes count ValueWeight as much, and a
	// tool whose name holds a word the query excludes loses
	// NegationPenalty of its score.
	ReadQuery                    bool
	ValueWeight, NegationPenalty float64
	// Typos reads a word nothing knows as the index term it misspells.
	Typos bool
	// Dense adds the ranking by word vectors (see dense.go), fused with
	// the lexical one as Fusion says; DenseFields weigh each field's terms
	// in a tool's vector.
	Dense       bool
	DenseFields [numFields]float64
	Fusion      Fusion
	// DenseWeight weighs the dense ranking against the lexical one;
	// cosines at or below DenseFloor do not count.
	DenseWeight, DenseFloor float64
	// RRFK is reciprocal rank fusion's k; FusionDepth how many of each
	// ranking it fuses.
	RRFK        float64
	FusionDepth int
	// Compounds reads a word nothing knows, and that misspells nothing, as
	// the index terms it starts or ends with ("ripgrep": grep, "findstr":
	// find), at this weight.
	Compounds float64
}

// DefaultOptions are the ranking toold serves, as docs/search.md measured
// it.
func DefaultOptions() Options {
	return Options{SplitNames: true, Stem: true, Thesaurus: true, WordNet: true, Params: true, Enums: true,
		Weights: [numFields]float64{3, 2, 1, 0.6, 0.4, 0.4},
		B:       [numFields]float64{0.3, 0, 0.75, 0.5, 0.75, 0.5},
		K1:      1.2, Related: 0.5, General: 0.25, ServerBoost: 0.5,
		ReadQuery: true, ValueWeight: 0.3, NegationPenalty: 0.5, Typos: true,
		Dense: true, DenseFields: [numFields]float64{1, 0, 1, 0, 0, 0},
		Fusion: Linear, DenseWeight: 0.1, RRFK: 60, FusionDepth: 100, Compounds: 0.75}
}

// Index is a searchable set of documents.
type Index struct {
	opts     Options
	n        int
	postings map[string][]posting
	an       *analyzer
	th       *thesaurus
	// servers maps a server's terms to the documents it hosts.
	servers map[string][]int32
	// named maps a term of tools' own names to the tools.
	named map[string][]int32
	// dense holds the tools' vectors (nil without Options.Dense).
	dense *denseIndex
	// scratch holds the per-search score arrays, zeroed, for reuse: a
	// search over 10,000 tools would otherwise allocate 160 KB.
	scratch sync.Pool
}

// buffers are one search's scratch arrays.
type buffers struct {
	scores, best []float64
	dense        []float64 // each tool's cosine with the query (for RRF)
	touched      []int32
}

// posting is a document's precomputed score for a term.
type posting struct {
	doc   int32
	score float32
}

// Hit is a document that matched, by its position in the docs given to
// Build.
type Hit struct {
	Doc   int
	Score float64
}

// Build indexes docs.
func Build(docs []Doc, o Options) *Index {
	ix := &Index{opts: o, n: len(docs), postings: map[string][]posting{}, an: newAnalyzer(o), servers: map[string][]int32{}, named: map[string][]int32{}}
	if o.Thesaurus || o.WordNet {
		ix.th = thesaurusFor(o.Stem)
	}
	fields := make([][numFields][]string, len(docs))
	var total [numFields]float64
	for i, d := range docs {
		fields[i] = ix.fields(d)
		for f := range numFields {
			total[f] += float64(len(fields[i][f]))
		}
		for _, t := range fields[i][fieldServer] {
			if ds := ix.servers[t]; len(ds) == 0 || ds[len(ds)-1] != int32(i) {
				ix.servers[t] = append(ds, int32(i))
			}
		}
		for _, t := range fields[i][fieldName] {
			if ds := ix.named[t]; len(ds) == 0 || ds[len(ds)-1] != int32(i) {
				ix.named[t] = append(ds, int32(i))
			}
		}
	}
	var avg [numFields]float64
	for f := range numFields {
		avg[f] = max(total[f]/float64(max(len(docs), 1)), 1)
	}
	combined := map[string]float64{} // one document's term -> weighted, normalised frequency
	for i := range docs {
		clear(combined)
		for f := range numFields {
			w := o.Weights[f] / (1 - o.B[f] + o.B[f]*float64(len(fields[i][f]))/avg[f])
			for _, t := range fields[i][f] {
				combined[t] += w
			}
		}
		for t, tf := range combined {
			ix.postings[t] = append(ix.postings[t], posting{doc: int32(i), score: float32(tf)})
		}
	}
	n := float64(len(docs))
	for _, ps := range ix.postings {
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for j := range ps {
			tf := float64(ps[j].score)
			ps[j].score = float32(idf * tf * (o.K1 + 1) / (tf + o.K1))
		}
	}
	if o.Dense {
		ix.buildDense(fields)
	}

	return ix
}

// fields are the terms of each field of d.
func (ix *Index) fields(d Doc) [numFields][]string {
	var out [numFields][]string
	an := ix.an
	server, tool := splitName(d.Name)
	out[fieldName] = an.identTerms(tool)
	out[fieldServer] = an.identTerms(server)
	if d.Source != server {
		out[fieldServer] = append(out[fieldServer], an.identTerms(d.Source)...)
	}
	out[fieldDescription] = append(an.terms(d.Title), an.terms(d.Description)...)
	for _, p := range d.Params {
		if ix.opts.Params {
			out[fieldParamName] = append(out[fieldParamName], an.identTerms(p.Name)...)
			out[fieldParamDescription] = append(out[fieldParamDescription], an.terms(p.Description)...)
		}
		if ix.opts.Enums {
			for _, e := range p.Enum {
				out[fieldEnum] = append(out[fieldEnum], an.identTerms(e)...)
			}
		}
	}
	return out
}

// Bytes estimates the memory the index holds: its postings and its
// terms, and the per-server lists (the thesaurus is shared by every index
// and not counted).
func (ix *Index) Bytes() int {
	const mapEntry = 48 // key header, value header, bucket overhead
	n := 0
	for t, ps := range ix.postings {
		n += mapEntry + len(t) + 24 + cap(ps)*8
	}
	for _, m := range []map[string][]int32{ix.servers, ix.named} {
		for t, ds := range m {
			n += mapEntry + len(t) + 24 + cap(ds)*4
		}
	}
	for w, s := range ix.an.stems {
		n += mapEntry + len(w) + len(s)
	}
	return n + ix.denseBytes()
}

// Len is the number of documents.
func (ix *Index) Len() int { return ix.n }

// Search returns the limit best documents for query that keep accepts
// (nil keeps all), best first; documents that match no term of the query
// are not returned.
func (ix *Index) Search(query string, limit int, keep func(doc int) bool) []Hit {
	if limit <= 0 {
		return nil
	}
	concepts, negated := ix.concepts(query)
	if len(concepts) == 0 {
		return ix.fallback(query, limit, keep)
	}
	b, _ := ix.scratch.Get().(*buffers)
	if b == nil {
		b = &buffers{scores: make([]float64, ix.n), best: make([]float64, ix.n)}
	}
	defer ix.scratch.Put(b)
	scores, best := b.scores, b.best // best: this concept's best match per document
	touched := b.touched[:0]
	defer clear(scores)
	for _, c := range concepts {
		touched = touched[:0]
		for _, alt := range c {
			for _, p := range ix.postings[alt.term] {
				s := alt.weight * float64(p.score)
				if best[p.doc] == 0 {
					touched = append(touched, p.doc)
				}
				best[p.doc] = max(best[p.doc], s)
			}
		}
		for _, d := range touched {
			scores[d] += best[d]
			best[d] = 0
		}
	}
	b.touched = touched
	ix.boostServers(concepts, scores)
	ix.penalise(negated, scores)
	if ix.dense != nil {
		if q := ix.queryVector(concepts); q != nil {
			ix.fuse(scores, q, b, limit, keep)
		}
	}
	return top(scores, limit, keep)
}

// boostServers raises the scores of the tools of every server the query
// names.
func (ix *Index) boostServers(concepts [][]alternative, scores []float64) {
	if ix.opts.ServerBoost == 0 {
		return
	}
	boosted := map[int32]bool{}
	for _, c := range concepts {
		for _, d := range ix.servers[c[0].term] {
			if !boosted[d] {
				boosted[d] = true
				scores[d] *= 1 + ix.opts.ServerBoost
			}
		}
	}
}

// top selects the limit best scores that keep accepts, asking keep only
// about documents that would make the list.
func top(scores []float64, limit int, keep func(int) bool) []Hit {
	var hits []Hit // sorted best first, at most limit long
	for d, s := range scores {
		if s <= 0 || len(hits) == limit && s <= hits[len(hits)-1].Score {
			continue
		}
		if keep != nil && !keep(d) {
			continue
		}
		i, _ := slices.BinarySearchFunc(hits, s, func(h Hit, s float64) int {
			if h.Score >= s {
				return -1
			}
			return 1
		})
		hits = slices.Insert(hits, i, Hit{Doc: d, Score: s})
		if len(hits) > limit {
			hits = hits[:limit]
		}
	}
	return hits
}

// alternative is a term that satisfies a concept of the query, and how
// much a match of it counts.
type alternative struct {
	term   string
	weight float64
}

// concepts analyses a query: each word is a concept that its own term
// satisfies fully and its related terms partly; a document scores the
// best of a concept's alternatives, so a word and its synonym both present
// count once. An abbreviation becomes the concepts of its expansion. The
// words of the values a query quotes count ValueWeight as much; the terms
// of what it excludes are returned apart.
func (ix *Index) concepts(query string) (out [][]alternative, negated []string) {
	p := parsedQuery{text: query}
	if ix.opts.ReadQuery {
		p = parseQuery(query)
	} else {
		p.hints = hints(query)
	}
	seen := map[string]bool{}
	add := func(t string, expanded bool, w float64) {
		if seen[t] {
			return
		}
		seen[t] = true
		c := []alternative{{t, w}}
		if ix.th != nil && ix.opts.Thesaurus {
			for _, r := range ix.th.related[t] {
				c = append(c, alternative{r, w * ix.opts.Related})
			}
		}
		if ix.th != nil && ix.opts.WordNet && !expanded {
			for _, r := range ix.th.general[t] {
				c = append(c, alternative{r, w * ix.opts.General})
			}
		}
		out = append(out, c)
	}
	ix.addText(p.text, 1, add)
	ix.addText(p.values, ix.opts.ValueWeight, add)
	for _, h := range p.hints {
		add(ix.an.queryTerm(h), true, 1)
	}
	for _, w := range words(p.negated, ix.an.prose()) {
		if t := ix.an.queryTerm(w); !stopwords[w] && !seen[t] {
			negated = append(negated, t)
		}
	}
	return out, negated
}

// addText adds the concepts of text's phrases and words, at weight w.
func (ix *Index) addText(text string, w float64, add func(t string, expanded bool, w float64)) {
	ws := words(text, ix.an.prose())
	if ix.th != nil && ix.opts.Thesaurus {
		all := make([]string, len(ws))
		for i, w := range ws {
			all[i] = ix.an.queryTerm(w)
		}
		for _, t := range ix.th.phraseTerms(all) {
			add(t, true, w)
		}
	}
	for _, word := range ws {
		if stopwords[word] {
			continue
		}
		t := ix.an.queryTerm(word)
		if ix.opts.Typos && !ix.known(t) {
			if near := ix.nearestTerm(t); near != "" {
				t = near
			} else if ix.opts.Compounds > 0 {
				for _, part := range ix.compoundParts(word) {
					add(part, false, w*ix.opts.Compounds)
				}
			}
		}
		add(t, false, w)
		if ix.th != nil && ix.opts.Thesaurus {
			for _, e := range ix.th.expand[t] {
				add(e, true, w)
			}
		}
	}
}

// known reports whether a query's term means anything to the index: a
// tool holds it, the thesaurus relates it, or the word vectors know it.
func (ix *Index) known(t string) bool {
	if len(ix.postings[t]) > 0 {
		return true
	}
	if ix.th != nil && (len(ix.th.related[t]) > 0 || len(ix.th.expand[t]) > 0 || len(ix.th.general[t]) > 0) {
		return true
	}
	if ix.dense != nil {
		_, ok := ix.dense.table.rows[t]
		return ok
	}
	return false
}

// penalise lowers the scores of the tools whose names hold a term the
// query excludes ("create a ticket, not a comment": add_comment).
func (ix *Index) penalise(negated []string, scores []float64) {
	if len(negated) == 0 || ix.opts.NegationPenalty == 0 {
		return
	}
	done := map[int32]bool{}
	for _, t := range negated {
		for _, d := range ix.named[t] {
			if !done[d] {
				done[d] = true
				scores[d] *= 1 - ix.opts.NegationPenalty
			}
		}
	}
}

// minPart is the shortest part of a compound word that compoundParts
// reads, in bytes.
const minPart = 4

// compoundParts are the index terms of the longest beginning and the
// longest end of word (a word no tool, no thesaurus entry and no word
// vector knows, and no typo of a term), of minPart bytes at least and two
// short of the word at most, that tools hold: decompounding, as search
// engines do for German, for the names people make of two words ("ripgrep"
// ends with grep, "findstr" starts with find, "hellosign" ends with sign).
// It is linear in the word's length: a map lookup per cut.
func (ix *Index) compoundParts(word string) []string {
	if len(word) < minPart+2 || len(word) > maxTypoLen || hasDigit(word) {
		return nil
	}
	var out []string
	for i := len(word) - 2; i >= minPart; i-- {
		if !utf8.RuneStart(word[i]) {
			continue
		}
		if t := ix.an.queryTerm(word[:i]); len(ix.postings[t]) > 0 {
			out = append(out, t)
			break
		}
	}
	for j := 2; len(word)-j >= minPart; j++ {
		if !utf8.RuneStart(word[j]) {
			continue
		}
		if t := ix.an.queryTerm(word[j:]); len(ix.postings[t]) > 0 && !slices.Contains(out, t) {
			out = append(out, t)
			break
		}
	}
	return out
}
