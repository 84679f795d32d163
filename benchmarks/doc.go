// Package benchmarks holds p2pc's performance measurements: Go benchmarks
// that drive the real plugins through the real plugin host and real p2pc
// processes, and the inputs of `p2pc bench`: bench.yaml (the setups and
// every suite's parameters), the Dask comparator in comparators/, and the
// block transfer benchmark in transfer/.
//
// docs/bench.md says how to run each benchmark; results/ holds the figures.
package benchmarks
