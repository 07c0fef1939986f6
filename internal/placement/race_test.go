//go:build race

package placement

// raceShapes bounds TestRandomShapes under the race detector, which makes
// it ten times slower; the plain run (and `make torture`-style long runs
// with -placement.shapes) covers the full count.
const raceShapes = 300
