// Package chaos is p2pc's chaos suite: one scenario per fault of issue 20,
// each breaking a real swarm on purpose and asserting that the job ends
// loudly and correctly.
//
// A scenario builds a lab (package harness: `p2pc join` peers and `p2pc
// run` in network namespaces of their own on one bridge), starts a job,
// injects its fault while the job runs (a malformed-results peer, a full
// disk on a tmpfs in a private mount namespace, corrupted blocks, SIGSTOP,
// a link cut at the bridge, a flood of idle connections, colluding liars,
// SIGKILL churn, a killed submitter), and asserts:
//
//   - the job ends: completes, or fails with the right exit code and
//     reason within a bound;
//   - where it completes, every task's digest equals a clean run's (the
//     same spec run once on the submitter alone, remembered by Env);
//   - no task is accepted twice (one ok attempt per done task);
//   - report.json is consistent (summary, digests, files);
//   - nothing the lab started is left running, and the logs hold no panic
//     or data race.
//
// Scenarios lists them; Env.Run runs one and returns its Outcome (exit
// code, job length, time to recover, lost work, notes). The package's
// tests run each once (-short leaves out the long partition scenario);
// `p2pc bench --suite chaos --runs N` (package harness/bench) runs each N
// times and writes results/chaos/. docs/chaos.md describes every scenario.
package chaos
