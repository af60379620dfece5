//go:build !race

package dispatch

const raceOn = false
