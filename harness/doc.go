// Package harness drives real p2pc processes: it builds the binary, starts
// processes with their output captured, waits for them with deadlines,
// stops them (the whole process group, also when the test or benchmark
// dies), and scans their logs for panics and data races.
//
// End-to-end tests and `p2pc bench` use it, so that what is tested and
// measured is the program users run, on real sockets, never a mock.
package harness
