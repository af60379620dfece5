package main

import (
	"fmt"
	"io"

	"github.com/toold/toold/bench/search/evalset"
	"github.com/toold/toold/internal/search"
)

// variant is the ranking with one technique changed.
type variant struct {
	name   string
	change func(*search.Options)
}

var variants = []variant{
	{"all techniques", func(*search.Options) {}},
	{"- dense (vectors)", func(o *search.Options) { o.Dense = false }},
	{"dense: RRF fusion", func(o *search.Options) { o.Fusion = search.RRF; o.DenseWeight = 0.2; o.RRFK = 10 }},
	{"- query reading", func(o *search.Options) { o.ReadQuery = false }},
	{"- typo tolerance", func(o *search.Options) { o.Typos = false }},
	{"- compound words", func(o *search.Options) { o.Compounds = 0 }},
	{"- camelCase split", func(o *search.Options) { o.SplitNames = false }},
	{"- stemming", func(o *search.Options) { o.Stem = false }},
	{"- domain thesaurus", func(o *search.Options) { o.Thesaurus = false }},
	{"- WordNet", func(o *search.Options) { o.WordNet = false }},
	{"- parameters", func(o *search.Options) { o.Params = false }},
	{"- enum values", func(o *search.Options) { o.Enums = false }},
	{"- field weights", func(o *search.Options) {
		for f := range o.Weights {
			o.Weights[f] = 1
		}
	}},
	{"- length norm", func(o *search.Options) {
		for f := range o.B {
			o.B[f] = 0.75
		}
	}},
}

// printAblation measures each variant: recall@1, @5 and MRR over the
// queries of a split, and recall@5 of the paraphrased ones.
func printAblation(out io.Writer, set *evalset.Set, qs []evalset.Query, split string) error {
	fmt.Fprintf(out, "\nablation, %s split:\nvariant               R@1    R@5    MRR    R@5 paraphrased\n", split)
	for _, v := range variants {
		o := search.DefaultOptions()
		v.change(&o)
		r := evalset.Evaluate(set, qs, ixRanker(search.Build(set.Tools, o)))
		all := r.Scores(func(evalset.Query) bool { return true })
		para := r.Scores(func(q evalset.Query) bool { return q.Kind == "paraphrased" })
		fmt.Fprintf(out, "%-20s  %.3f  %.3f  %.3f  %.3f\n", v.name, all.R1, all.R5, all.MRR, para.R5)
	}
	return nil
}
