package main

import (
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/toold/toold/internal/search"
)

// bm25 is the baseline: plain Okapi BM25 (k1 1.2, b 0.75) over one text
// per tool — its name, description, and parameter names and descriptions
// — cut into lower-case runs of letters and digits, with no stemming, no
// stop words, no synonyms and no field weights.
type bm25 struct {
	docs [][]string
	df   map[string]int
	avg  float64
}

func tokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func newBM25(docs []search.Doc) *bm25 {
	b := &bm25{df: map[string]int{}}
	total := 0
	for _, d := range docs {
		text := d.Name + " " + d.Title + " " + d.Description
		for _, p := range d.Params {
			text += " " + p.Name + " " + p.Description
		}
		ts := tokens(text)
		b.docs = append(b.docs, ts)
		total += len(ts)
		seen := map[string]bool{}
		for _, t := range ts {
			if !seen[t] {
				seen[t] = true
				b.df[t]++
			}
		}
	}
	b.avg = float64(total) / float64(max(len(docs), 1))
	return b
}

func (b *bm25) search(q string, limit int) []search.Hit {
	const k1, bb = 1.2, 0.75
	n := float64(len(b.docs))
	var hits []search.Hit
	qs := tokens(q)
	for i, d := range b.docs {
		tf := map[string]int{}
		for _, t := range d {
			tf[t]++
		}
		s := 0.0
		for _, t := range qs {
			f := float64(tf[t])
			if f == 0 {
				continue
			}
			df := float64(b.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s += idf * f * (k1 + 1) / (f + k1*(1-bb+bb*float64(len(d))/b.avg))
		}
		if s > 0 {
			hits = append(hits, search.Hit{Doc: i, Score: s})
		}
	}
	return best(hits, limit)
}

// best sorts hits by score, best first (stable: ties keep the catalog's
// order), and keeps the first limit.
func best(hits []search.Hit, limit int) []search.Hit {
	slices.SortStableFunc(hits, func(a, b search.Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}
