//go:build !race

package placement

const raceShapes = 0
