// Package phasetrace records when a lease passes each phase of its path,
// for measuring where one task's time goes (issue 16: the unloaded single
// task). It is off unless the environment variable P2PC_PHASE_TRACE names
// a file when the process starts; then every p2pc process that has it
// (the coordinator and the peers, which share one clock on one machine)
// appends a line per mark to that file:
//
//	<unix nanoseconds> <pid> <phase> <lease ID>
//
// Phases, in a lease's order: coordinator "c.lease" (the queue issued it),
// "c.sent" (on the stream); peer "p.recv", "p.admit" (queued for a slot),
// "p.exec" (its slot takes it), "p.start" and "p.end" (the plugin call's,
// as the result carries them), "p.sent" (the result on the stream);
// coordinator "c.recv", "c.settled" (the queue counted the result).
// Besides the leases' phases, a peer's plugin pool marks each process
// start: "p.spawn" (lease 0) when it begins and "p.spawned" (the
// process's pid in the lease field) when it is attached, so a trace shows
// the starts that fall inside a run (harness.ReadPhaseTrace skips them).
// Lease IDs are per job run: a reader starts a new record at each
// "c.lease" (harness.ReadPhaseTrace). Off, a mark costs one branch.
package phasetrace
