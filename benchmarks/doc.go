// Package benchmarks holds p2pc's performance measurements: Go benchmarks
// that drive the real plugins through the real plugin host and real p2pc
// processes, and the inputs of `p2pc bench` (docs/bench.md):
//
//   - bench.yaml: the heterogeneous setups (cores of CPU quota per peer)
//     and every suite's parameters, full and --quick;
//   - comparators/dask_tasks.py: the Dask LocalCluster comparator of the
//     tracker and latency suites (Debian's python3-distributed);
//   - transfer/: the block transfer benchmark (run.sh), which the bench's
//     transfer suite runs.
//
// dispatch_test.go measures dispatch latency and tiny-task throughput
// with real `p2pc join` processes on 127.0.0.1 (issue 4):
//
//	go test ./benchmarks -run '^$' -bench 'DispatchLatency|TinyTaskThroughput' -benchtime 5x
//
// resume_test.go measures a resume after SIGKILL (issue 15): the time
// from the rerun's start to its first new lease, and the tasks run twice,
// of a 100,000-task job killed at 50 %, with the peers' hand-over and
// without it (P2PC_BENCH_RESUME_KEEP=0: the peers keep nothing):
//
//	go test ./benchmarks -run '^$' -bench ResumeAfterKill -benchtime 3x -timeout 1h
//	P2PC_BENCH_RESUME_KEEP=0 go test ./benchmarks -run '^$' -bench ResumeAfterKill -benchtime 3x -timeout 1h
//
// The other benchmarks run with `just bench`, or:
//
//	go test ./benchmarks -run '^$' -bench Echo -benchtime 2000x -count 3
//
// Figures measured on the project's machines are recorded in results/.
package benchmarks
