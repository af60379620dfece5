package evalset

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

// Result is a ranker's outcome on each query.
type Result struct {
	set     *Set
	queries []Query
	ranks   []int // 1-based rank of the first expected tool; 0 = not found
	top     [][]string
}

// Ranker answers a query with hits, best first.
type Ranker func(q string, limit int) []search.Hit

// Evaluate runs every query of qs through rank.
func Evaluate(set *Set, qs []Query, rank Ranker) *Result {
	r := &Result{set: set, queries: qs}
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

// Scores are the figures of a group of queries: how many, recall@1, @3,
// @5 and MRR.
type Scores struct {
	N               int
	R1, R3, R5, MRR float64
}

// Scores returns the figures of the queries keep accepts.
func (r *Result) Scores(keep func(Query) bool) Scores {
	var s Scores
	for i, q := range r.queries {
		if !keep(q) {
			continue
		}
		s.N++
		k := r.ranks[i]
		if k == 0 {
			continue
		}
		s.MRR += 1 / float64(k)
		if k <= 1 {
			s.R1++
		}
		if k <= 3 {
			s.R3++
		}
		if k <= 5 {
			s.R5++
		}
	}
	if s.N > 0 {
		n := float64(s.N)
		s.R1, s.R3, s.R5, s.MRR = s.R1/n, s.R3/n, s.R5/n, s.MRR/n
	}
	return s
}

// kinds are the query kinds present, in their first order.
func (r *Result) kinds() []string {
	var ks []string
	for _, q := range r.queries {
		if !slices.Contains(ks, q.Kind) {
			ks = append(ks, q.Kind)
		}
	}
	return ks
}

// Print writes a row per kind of query, and one for all.
func (r *Result) Print(out io.Writer, name string) {
	for _, k := range r.kinds() {
		s := r.Scores(func(q Query) bool { return q.Kind == k })
		fmt.Fprintf(out, "%-14s %-12s %3d  %.3f  %.3f  %.3f  %.3f\n", name, k, s.N, s.R1, s.R3, s.R5, s.MRR)
	}
	s := r.Scores(func(Query) bool { return true })
	fmt.Fprintf(out, "%-14s %-12s %3d  %.3f  %.3f  %.3f  %.3f  (%d empty answers)\n", name, "all", s.N, s.R1, s.R3, s.R5, s.MRR, r.Empty())
}

// Empty counts the queries answered with no tool at all.
func (r *Result) Empty() int {
	n := 0
	for _, t := range r.top {
		if len(t) == 0 {
			n++
		}
	}
	return n
}

// PrintMisses lists the queries whose tool is not first.
func (r *Result) PrintMisses(out io.Writer) {
	fmt.Fprintln(out, "\nqueries whose tool is not first:")
	for i, q := range r.queries {
		if r.ranks[i] != 1 {
			fmt.Fprintf(out, "  [%s] %q wants %s, rank %d; got %s\n", q.Kind, q.Text, strings.Join(q.Expected, ","),
				r.ranks[i], strings.Join(r.top[i], ", "))
		}
	}
}
