//go:build race

package dispatch

// raceOn: the race detector's instrumentation allocates, so allocation
// counts are not the program's.
const raceOn = true
