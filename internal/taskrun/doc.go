// Package taskrun is the one execution path of a task attempt, the same
// whether the slot is the submitter's own (package job) or a peer's
// (package node). Run runs the attempt in a warm plugin of the job's pool
// with the job's timeout and the caller's Host, stages the result's files
// beside the work folder, digests the output, and classifies the error
// into a report outcome. RunBatch does the same for several attempts
// through as few plugin calls as it can.
//
// PreStart is the step before a slot's plugin processes start: it applies
// the slot's Binding (a GPU slot's device: environment, the device nodes
// its sandbox opens) to the pool's configuration.
//
// The caller owns the work folder, the Host and what becomes of the
// staged output. An output of inline data alone, up to
// Attempt.InlineMax bytes, is digested in memory and not staged.
package taskrun
