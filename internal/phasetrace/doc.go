// Package phasetrace records when a lease passes each phase of its path,
// to measure where one task's time goes.
//
// It is off unless the environment variable P2PC_PHASE_TRACE names a file
// when the process starts. Then every p2pc process that has it appends
// one line per mark to that file:
//
//	<unix nanoseconds> <pid> <phase> <lease ID>
//
// Off, a mark costs one branch. docs/bench.md lists the phases and how
// harness.ReadPhaseTrace reads a trace.
package phasetrace
