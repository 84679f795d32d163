// Package benchmarks holds p2pc's performance measurements: Go benchmarks
// that drive the real plugins through the real plugin host, and (in
// subfolders) the job specs, input generators and comparator scripts of
// the seed papers' experiments.
//
// Run them with `just bench`, or:
//
//	go test ./benchmarks -run '^$' -bench . -benchtime 2000x -count 3
//
// Figures measured on the project's machines are recorded in results/.
package benchmarks
