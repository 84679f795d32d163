// Package job runs a job on the submitter: it prepares the job (resolves
// or builds the plugin, hashes the inputs, computes the job ID, checks the
// output folder), farms the tasks out to the local machine's slots and to
// the swarm's peers (both run an attempt through package taskrun, the one
// execution path), verifies outputs, retries failed attempts, collects each task's
// output atomically into the output folder, runs the optional reduce step
// and keeps report.json up to date as a journal.
//
// Output folder layout:
//
//	OUT/report.json        the run report (written atomically, at least every second)
//	OUT/tasks/<id>/...     each task's output files ("data" holds inline data)
//	OUT/<artifact>         the reduce step's files, only when every task succeeded
//	OUT/.p2pc/work/        per-attempt work dirs, removed when done
//
// A task's output folder appears only when the task is complete (it is
// assembled elsewhere and renamed into place), so a crash or Ctrl-C never
// leaves a half-written output looking complete; report.json says which
// tasks are done, and re-running the same job resumes: tasks recorded as
// done whose files still match their digest are not run again.
//
// The decisions are made by plain data structures in subpackages: sched
// (the lease queue, the vote, trust) and vc (the state tasks share). This
// package gives them their side effects: output folders, events, the
// report's lock and journal. It also watches for work nobody takes: when
// tasks are left, none runs and nothing moved for RunOptions.StallAfter,
// the run logs why (the queue's Stalled) and ends with ErrStalled, or,
// asked to wait for peers, keeps waiting and says why.
//
// A watcher (the web view) reads a running job through Live, given in
// RunOptions.Live: the live report under the runner's lock, and the state
// of each peer's work session (so a peer whose session broke shows as lost
// at once). Live only reads; it never changes the run.
//
// A write that fails on this machine's own disk (the output folder or the
// block store: ENOSPC, EDQUOT, EROFS, EACCES) is classified where it is
// written (localfault.go: staging a local or a peer's output, placing it,
// fetching output blocks, publishing, the journal): it stops the run at
// once with an error wrapping ErrLocalDisk ("output folder DIR: no space
// left on device"), and the attempt it broke is canceled, charged to no
// peer. A failed local attempt probes the output folder, since a plugin
// reports the disk it could not write only as text.
//
// The digest of a task's output is the SHA-256 of its canonical listing:
// one line "<sha256 of file> <size> <name>\n" per file, sorted by name.
package job
