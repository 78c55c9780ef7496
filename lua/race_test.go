//go:build race

package lua_test

// raceDetector is true when the tests run with -race.
const raceDetector = true
