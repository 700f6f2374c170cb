//go:build race

package sim

// raceEnabled: under the race detector a seed costs about ten times its
// CPU, so TestSim runs one fresh seed by default there; make test runs
// its hundred fresh seeds without it (make sim).
const raceEnabled = true
