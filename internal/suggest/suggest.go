// Package suggest finds the name a caller probably meant: a tool, a
// parameter, a config key, a file. Every "did you mean" in toold comes from
// here, so they all judge closeness the same way.
package suggest

import "slices"

// Distance is the Levenshtein distance of a and b in bytes, giving up
// (returning limit+1) as soon as it cannot be within limit, so a long or
// hostile input costs little.
func Distance(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		best := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			best = min(best, cur[j])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Closest returns the candidate nearest to name within limit edits (ties go
// to the alphabetically first), or "" when none is that close.
func Closest(name string, candidates []string, limit int) string {
	return first(Nearest(name, candidates, limit, 1))
}

// Nearest returns up to n candidates within limit edits, nearest first.
func Nearest(name string, candidates []string, limit, n int) []string {
	type cand struct {
		name string
		d    int
	}
	var cands []cand
	for _, c := range candidates {
		if d := Distance(name, c, limit); d <= limit {
			cands = append(cands, cand{c, d})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.d != b.d {
			return a.d - b.d
		}
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	out := make([]string, 0, min(n, len(cands)))
	for i := 0; i < len(cands) && i < n; i++ {
		out = append(out, cands[i].name)
	}
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}
