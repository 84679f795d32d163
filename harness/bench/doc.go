// Package bench is `p2pc bench`: it reproduces the seed papers'
// experiments on this machine with real p2pc processes in labs (package
// harness) and writes raw JSON, CSV, SVG charts and markdown summaries
// into results/.
//
// Suites (one file each, registered from init):
//
//   - mandelbrot: Preon 4.1's Mandelbrot farm (256 tasks) on Fenech &
//     Vella's heterogeneous setups: in each of 5 rounds every peer alone
//     (R_Mi) and the setup together (R_H), in a rotated order (heteroPlan);
//     S_H, S_H,max and efficiency per round, their medians with 95%
//     intervals.
//   - tracker: Preon 4.2, 2048 echo tasks on 16 peers x 32 slots; tasks/s
//     over the makespan and over the whole command, and the coordinator's
//     busy fraction over time, beside GNU parallel and a standing Dask
//     LocalCluster timed alike.
//   - latency: Preon 4.3, 200 echo tasks on 10 peers x 20 slots; each
//     task's lease to end and submission (p2pc run start) to result,
//     beside Dask's submit to result and client start to result.
//   - transfer: Preon 4.4, by running benchmarks/transfer/run.sh.
//   - ga: Fenech & Vella 5, the island GA of plugins/tspga at several
//     problem sizes on the setups (Env.HeterogeneousJobs).
//   - scale: no paper; 8, 32 and 96 peers of one slot: time to a full
//     membership, to every peer leased, tasks/s and the coordinator's CPU
//     per peer, against the peer count.
//
// Statistics (stats.go): every headline figure is a median over rounds
// with a 95% bootstrap percentile interval (MedianCI), "median [lo, hi]"
// in the summaries and error bars in the SVGs; an efficiency whose whole
// interval lies above 100% is flagged (HeteroResult.Suspect).
//
// A new suite is one file in this package
// with a type implementing Suite and `func init() { Register(x{}) }`; its
// parameters go under `suites: NAME:` in benchmarks/bench.yaml (full and
// quick sections, read with Env.Config.Decode), and Env.Heterogeneous
// measures any job on the selected setups. docs/bench.md describes the
// interface.
//
// Capacities: each peer of a setup runs under a CFS quota (cgroup v1
// cpu.cfs_quota_us with a 10 ms period, or v2 cpu.max) that covers its
// plugin processes, pinned to a core with others whose capacities add up
// to at most 0.95 (PackCPUs); the setups of benchmarks/bench.yaml must add
// up to fewer cores than the machine has. Rates are tasks per second over a
// job's makespan, from the first lease the coordinator issued to the last
// result (report.json), after a warm-up job; every measured run of the
// heterogeneous suites is a job of its own, so that its plugin processes
// start cold alone and together alike (Env.freshJob).
package bench
