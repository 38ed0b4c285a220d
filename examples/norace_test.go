//go:build !race

package examples_test

// raceEnabled says the test binary runs with the race detector, so the
// example programs are built with it too.
const raceEnabled = false
