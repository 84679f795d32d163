// Package sched is the scheduling heart of a job on its coordinator: the
// lease queue and the vote.
//
// Workers (local slots, remote peers) pull leases from a Queue, so fast
// workers take more work and nobody is flooded; a remote peer prefetches
// through TryNext up to the credits it granted. Each lease is one attempt
// (one replica) of a task. Tiny tasks are leased in batches (batch.go:
// BatchSize, guided self-scheduling over measured run times), which a
// worker runs through one plugin call; each lease keeps its own attempt,
// result and vote. A job starts with a probe (probe.go): one lease per
// worker until the first run time is measured or ProbeWindow passes. A worker reports a Result through Finish; a
// lost peer's leases are requeued at once by Lose, ahead of tasks never
// tried and without counting against the task's retries, and Expire
// revokes leases that outlived the lease deadline.
//
// Every failed attempt is charged (Fault): a lost attempt counts against
// the task's MaxLost bound (then it fails, listing why each attempt was
// lost), and, when the peer is to blame, gives the peer a strike: a
// malformed result for good, a lost session or expired lease until its
// next valid result. Strikes of one kind exclude the peer from the job.
// Stalled tells the no-progress watchdog when work is left that nothing
// runs, and why: each peer's refusal, failure or exclusion (Refused,
// SessionFailed). Near the end of a job without verification an idle
// worker gets a backup copy of the slowest task (first result wins); a
// batched lease only if its worker stopped reporting results.
//
// With verification (spec.Verify: replicas k, quorum q, max_replicas, or
// the plugin's own check) replicas run on distinct peers (workers; the
// job layer names each by the node ID its handshake proved) and, with
// spec.Verify.DistinctHosts, on distinct hosts (Enrol's host), and vote with
// their output digests: a digest is accepted once q votes agree; two
// digests make the task disputed, more replicas run up to max_replicas
// and a digest then needs q votes and a strict majority, else the task
// fails with "no quorum". Peers that lose votes lose trust; after three
// losses a peer is excluded and every task it helped accept is verified
// again. Under adaptive trust a peer with a long streak of valid results
// is replicated only with probability 1/streak; streaks persist across
// jobs in a trust file.
//
// A Queue is a plain data structure: its side effects (placing, fetching
// and discarding outputs; progress events) go through the small Env
// interface, its time through a Clock, and its record of each task
// (state, attempts, votes, verdict) into the job's report.Report under a
// lock the caller gives, so that it is tested with table tests and no
// process.
// Lock order: Queue.mu, then ReportLock and what OnRevoke callbacks take; Lease.revokeMu is a leaf.
package sched
