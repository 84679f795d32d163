// Package sched is the scheduling core of a job on its coordinator: the
// lease queue and the vote.
//
// Workers, local slots and remote peers, pull leases from a Queue, so
// fast workers take more work and nobody is flooded. A lease is one
// attempt of a task; tiny tasks are leased in batches. A worker reports
// each Result through Finish. A lost peer's leases are requeued at once
// and do not count against the task's retries.
//
// Invariants: every failed attempt is charged to the task's bounds and,
// when the peer is to blame, to the peer, and a peer with too many strikes
// is excluded from the job. With verification, replicas run on distinct
// peers and a digest is accepted only with a quorum of agreeing votes.
// Stalled says when work is left that nothing runs, and why.
//
// A Queue is a plain data structure: its side effects go through the Env
// interface, its time through a Clock, and its record of each task into
// the job's report.Report under a lock the caller gives. It is tested
// with table tests and no process. docs/design/sched.md tells the story.
// Lock order: Queue.mu, then ReportLock and what OnRevoke callbacks take; Lease.revokeMu is a leaf.
package sched
