//go:build race

package transfer_test

// raceEnabled makes the real-process tests build p2pc with -race too, so
// that their log scan can catch data races in the binaries.
const raceEnabled = true
