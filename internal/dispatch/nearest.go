package dispatch

import "toold/internal/registry"

// nearest returns the tool name closest to name by edit distance, among the
// tools the caller may use, when it is close enough to be a likely typo.
func nearest(name string, reg *registry.Registry, allowed func(string) bool) string {
	best, bestDist := "", len(name)/2+2
	for _, e := range reg.Entries() {
		n := e.Spec.Name
		if allowed != nil && !allowed(n) {
			continue
		}
		if d := editDistance(name, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, bounded to short names (tool
// names are at most 64 bytes; longer input is not a typo of one).
func editDistance(a, b string) int {
	if len(a) > 128 {
		return len(a)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
