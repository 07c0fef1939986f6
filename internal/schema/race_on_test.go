//go:build race

package schema

// raceEnabled: the race detector adds allocations of its own.
const raceEnabled = true
