// Package sched is the scheduling core of a job on its coordinator: the
// lease queue and the vote.
//
// Workers, local slots and remote peers, pull leases from a Queue, so
// fast workers take more work and nobody is flooded. A lease is one
// attempt of a task; tiny tasks are leased in batches. A worker reports
// each Result through Finish, or several at once through FinishAll. A lost peer's leases are requeued at once
// and do not count against the task's retries.
//
// Invariants: a worker holds at most its slots' share of the work left
// (fair.go); one that holds none may always take a pending task. Every
// failed attempt is charged to the task's bounds and, when the peer is to
// blame, to the peer, and a peer with too many strikes is excluded from
// the job. With verification, replicas run on distinct
// peers and a digest is accepted only with a quorum of agreeing votes.
// Stalled says when work is left that nothing runs, and why. Held tasks
// (Config.Held; add.go: Release, Drop) count as work left but are leased
// only once released: a queue whose work left is all held waits and is
// not stalled.
//
// Decide, then apply: the queue decides; it changes nothing outside
// itself but the tasks' records in the report (under ReportLock). What
// else it decides (leases, settlements, requeues, outputs to place or
// discard, tasks done, exclusions) it returns as Decision values to its
// Applier, after letting its lock go, in the order decided. A task is
// done only once its Accept was applied: the Applier's error comes back
// into the queue. Decisions have a stable Record form and Replay gives
// the report again from them. docs/design/sched.md tells the story.
//
// Lock order: Queue.mu, then ReportLock; the lane's lock and
// Lease.revokeMu are leaves. The Applier and OnRevoke callbacks run under
// none of the queue's locks.
package sched
