//go:build !race

package transfer_test

const raceEnabled = false
