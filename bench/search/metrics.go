package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/toold/toold/internal/search"
)

// depth is how far down the results a query's tool is looked for (MRR
// counts a tool found deeper as not found).
const depth = 20

// result is a ranker's outcome on each query.
type result struct {
	set     *Set
	queries []Query
	ranks   []int // 1-based rank of the first expected tool; 0 = not found
	top     [][]string
}

func evaluate(set *Set, qs []Query, rank ranker) *result {
	r := &result{set: set, queries: qs}
	for _, q := range qs {
		hits := rank(q.Text, depth)
		found, names := 0, make([]string, 0, 3)
		for i, h := range hits {
			name := set.Tools[h.Doc].Name
			if i < 3 {
				names = append(names, name)
			}
			if found == 0 && slices.Contains(q.Expected, name) {
				found = i + 1
			}
		}
		r.ranks = append(r.ranks, found)
		r.top = append(r.top, names)
	}
	return r
}

// scores are the figures of a group of queries.
type scores struct {
	n               int
	r1, r3, r5, mrr float64
}

func (r *result) scores(keep func(Query) bool) scores {
	var s scores
	for i, q := range r.queries {
		if !keep(q) {
			continue
		}
		s.n++
		k := r.ranks[i]
		if k == 0 {
			continue
		}
		s.mrr += 1 / float64(k)
		if k <= 1 {
			s.r1++
		}
		if k <= 3 {
			s.r3++
		}
		if k <= 5 {
			s.r5++
		}
	}
	if s.n > 0 {
		n := float64(s.n)
		s.r1, s.r3, s.r5, s.mrr = s.r1/n, s.r3/n, s.r5/n, s.mrr/n
	}
	return s
}

// kinds are the query kinds present, in their first order.
func (r *result) kinds() []string {
	var ks []string
	for _, q := range r.queries {
		if !slices.Contains(ks, q.Kind) {
			ks = append(ks, q.Kind)
		}
	}
	return ks
}

func (r *result) print(out io.Writer, name string) {
	for _, k := range r.kinds() {
		s := r.scores(func(q Query) bool { return q.Kind == k })
		fmt.Fprintf(out, "%-14s %-12s %3d  %.3f  %.3f  %.3f  %.3f\n", name, k, s.n, s.r1, s.r3, s.r5, s.mrr)
	}
	s := r.scores(func(Query) bool { return true })
	fmt.Fprintf(out, "%-14s %-12s %3d  %.3f  %.3f  %.3f  %.3f\n", name, "all", s.n, s.r1, s.r3, s.r5, s.mrr)
}

func (r *result) printMisses(out io.Writer) {
	fmt.Fprintln(out, "\nqueries whose tool is not first:")
	for i, q := range r.queries {
		if r.ranks[i] != 1 {
			fmt.Fprintf(out, "  [%s] %q wants %s, rank %d; got %s\n", q.Kind, q.Text, strings.Join(q.Expected, ","),
				r.ranks[i], strings.Join(r.top[i], ", "))
		}
	}
}

// variant is the ranking with one technique changed.
type variant struct {
	name   string
	change func(*search.Options)
}

var variants = []variant{
	{"all techniques", func(*search.Options) {}},
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

// printAblation measures each variant: recall@1, @5 and MRR over all the
// queries, and recall@5 of the paraphrased ones.
func printAblation(out io.Writer, set *Set, qs []Query) error {
	fmt.Fprintln(out, "\nvariant               R@1    R@5    MRR    R@5 paraphrased")
	for _, v := range variants {
		o := search.DefaultOptions()
		v.change(&o)
		r := evaluate(set, qs, ixRanker(set, search.Build(set.Tools, o)))
		all := r.scores(func(Query) bool { return true })
		para := r.scores(func(q Query) bool { return q.Kind == "paraphrased" })
		fmt.Fprintf(out, "%-20s  %.3f  %.3f  %.3f  %.3f\n", v.name, all.r1, all.r5, all.mrr, para.r5)
	}
	return nil
}
