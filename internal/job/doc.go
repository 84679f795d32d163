// Package job runs a job on the submitter. Prepare resolves or builds the
// plugin, hashes the inputs, computes the job ID and checks the output
// folder. The run farms the tasks out to the local slots and to the
// swarm's peers, verifies outputs, retries failed attempts, places each
// task's output in the output folder, runs the optional reduce step, and
// journals the job's state in OUT/job.db (package jobdb). RunGraph runs
// a job with stages: every stage at once, each a job of its own in
// OUT/stages/<name>, its tasks seeing their upstream outputs as inputs;
// a task of an `each` or `group` edge is released as soon as the
// upstream tasks it needs are accepted (graph.go, graphrun.go,
// stream.go). RunFork runs a job whose tasks spawn tasks
// (spec.Job.Spawn) in rounds, each a job of its own in OUT/rounds/<n>:
// a task waiting for its children ends its call suspended and is run
// again once they are done (fork.go, docs/design/fork.md).
//
// Invariants:
//
//   - A task's output folder appears only when the task is complete: it
//     is assembled elsewhere and renamed into place.
//   - job.db says which tasks are done. Rerunning the same job resumes
//     it, after a SIGKILL too, and runs no done task whose files still
//     match their digest.
//   - Results that peers finished while the coordinator was gone are
//     handed over when the rerun enrols them, and settled like live
//     results. A resumed run leases no task until the last run's peers
//     have handed over, or a bound has passed.
//   - With RunOptions.Replicate (a job handed to the swarm), a result is
//     acknowledged to its peer only once a snapshot of the job database
//     that holds it is on the job's successors (replicate.go); while
//     they have lacked a committed pass for a second, the run leases
//     nothing new (leasegate.go); a peer that has seen a later owner's
//     epoch refuses the run (ErrFenced).
//   - A write refused by this machine's own disk stops the run at once
//     with an error wrapping ErrLocalDisk, charged to no peer.
//   - Each peer runs the plugin built for its own platform (platforms.go);
//     a peer the job has none for gets no task, and the report's warnings
//     say why. The job ID does not depend on the submitter's platform.
//
// Ownership: sched (the lease queue and the vote) and vc (the state
// tasks share) decide; this package applies. The runner's queueEnv
// applies the queue's decisions after the queue let its lock go, in the
// order decided: it places outputs, removes stages, marks records for the
// journal and sends events. One journal goroutine hands every change to
// the database's writer. Live gives a watcher, such as the web view,
// read-only access to a running job; GraphLive to a running graph (a
// Live per stage).
//
// Lock order: graphRun.mu (a job with stages), then sched.Queue's, then
// runner.mu (its ReportLock), then jobdb's. A stage's run calls its graph
// (stageLink) under none of its locks. queueEnv runs under none of the
// queue's locks and takes runner.mu; sessionList.send comes before the
// journal's queue, and sessionList.mu is a leaf that the journal's writer
// takes; remoteWorker.mu and the other mutexes are leaves. GraphLive
// takes graphRun.mu and a stage's Live one after the other, never both.
//
// docs/design/job.md describes the output folder, resuming, rebasing an
// edited job and the journal.
package job
