// Package chaos is p2pc's chaos suite: each scenario breaks a real swarm
// on purpose while a job runs and asserts that the job ends loudly and
// correctly.
//
// Every scenario asserts that the job ends within a bound, completing or
// failing with the right exit code and reason; that a completed task's
// digest equals a clean run's; that no task is accepted twice; that
// report.json is consistent; and that nothing the lab started is left
// running, with no panic or data race in the logs.
//
// Scenarios lists them and Env.Run runs one. docs/chaos.md describes
// every scenario and how to run the suite.
package chaos
