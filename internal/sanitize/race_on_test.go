//go:build race

package sanitize

// raceEnabled: the race detector makes large allocations cost more than
// their size, so CPU-time growth checks do not hold under it.
const raceEnabled = true
