// Package vc is a job's "virtual computer" (Fenech and Vella): the state
// that the tasks of one job share, held by the coordinator so that it
// survives any peer — messages between tasks, job-global variables with
// versions (compare-and-swap), and checkpoints.
//
// Every Host call of a task, local or remote, ends up in a State, made by
// one attempt of the task through its Cursor. A task has a log of the
// shared-state operations it made, with their results; an attempt replays
// that log from its starting point (the beginning, or its checkpoint's
// position), so an operation that raced with a peer's death is applied
// exactly once and a resumed task sees the results the attempt it
// replaces saw. A State is a plain data structure: no process, no clock
// but the checkpoint's time stamp, no network; the only side effects are
// the optional Store that keeps checkpoints as blocks and the optional
// Journal (the job database) that is told every change in order, from
// which Restore rebuilds the State when a job resumes.
package vc
