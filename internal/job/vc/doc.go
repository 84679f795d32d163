// Package vc is a job's "virtual computer" (Fenech and Vella): the state
// that the tasks of one job share, held by the coordinator so that it
// survives any peer. It holds messages between tasks, job-global
// variables with versions, and checkpoints.
//
// Every Host call of a task attempt, local or remote, goes to the job's
// State through the attempt's Cursor. Each task has a log of its
// shared-state operations and their results. A new attempt replays that
// log from the beginning or from its checkpoint, so an operation is
// applied exactly once even if it raced with a peer's death.
//
// A State is a plain data structure guarded by one mutex. Its only side
// effects are the optional store of checkpoint blocks and the optional
// Journal, which is told every change in order; Restore rebuilds a State
// from the journal when a job resumes.
package vc
