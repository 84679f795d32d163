// Package job runs a job on the submitter: it prepares the job (resolves
// or builds the plugin, hashes the inputs, computes the job ID, checks the
// output folder; CheckPlugin alone checks the plugin as a run would, for
// p2pc validate), farms the tasks out to the local machine's slots and to
// the swarm's peers (both run an attempt through package taskrun, the one
// execution path), verifies outputs, retries failed attempts, collects each task's
// output atomically into the output folder, runs the optional reduce step
// and journals the job's state in its SQLite database (package jobdb).
//
// Output folder layout:
//
//	OUT/job.db             the job's state, journaled as it changes (group commit,
//	                       a few ms); the journal a rerun resumes from
//	OUT/report.json        the run report, written when the run ends from the
//	                       text of the decided tasks kept as they were journaled
//	                       (spool.go; job.db past its bound), the same bytes
//	                       `p2pc report OUT` writes from job.db at any time
//	OUT/tasks/<id>/...     each task's output files; a task whose output is only
//	                       inline data (up to 1 MiB) gets no folder: its bytes
//	                       are in job.db (table outputs), `p2pc export OUT`
//	                       writes them to OUT/tasks/<id>/data, and the reduce
//	                       step reads them as files written out for it
//	OUT/<artifact>         the reduce step's files, only when every task succeeded
//	OUT/.p2pc/work/        per-attempt work dirs, removed when done
//
// Each task has a key (taskkey.go: the digest of its plugin, ID, merged
// params and inputs), journaled with its row. An output folder holding a
// job of the same name and another job ID (an edited spec) is rebased by
// Prepare (rebase.go): its done tasks whose ID and key are unchanged are
// kept, renumbered, and reused like a resumed job's; every other task's
// rows go, and its folder (moved out of OUT/tasks by one rename first).
// A folder of a job of another name needs PrepareOptions.Force. A task
// reused is marked so in job.db and report.json (Task.Reused,
// Summary.Reused).
//
// A task's output folder appears only when the task is complete (it is
// assembled elsewhere and renamed into place), so a crash or Ctrl-C never
// leaves a half-written output looking complete; job.db says which tasks
// are done, and re-running the same job resumes, after a SIGKILL too:
// tasks recorded as done whose files still match their digest are not
// run again. Every change to a task's record is marked (sched's
// Env.Touched) and handed to the database's writer by one journal
// goroutine; a failure of the database (a full disk) ends the run with
// that error, and what was committed stays for the rerun. The journal
// holds a running task's row back for up to a second (holdRunning): a
// short task's row is written once, done, and job.db shows a running
// task a second late at most (a rerun runs it again either way). The shared
// state (vc) is journaled there too (vcjournal.go) and restored by the
// rerun. Peers that finished tasks of the run while its coordinator was
// gone hand those results over when the rerun enrols them (remote.go
// adopt, sched's Queue.Adopt): each is settled like a live result, as an
// attempt of that peer, and the task is not scheduled again; until the
// peers of the last coordinator's sessions (listed in job.db) have handed
// over, early in a resumed run, no task is leased (handover.go, Queue.Hold).
// Peers keep each result until the coordinator acknowledges it: the
// journal numbers its passes, and a result settled before a pass that the
// database committed is acknowledged (Acks); when the job is over the
// coordinator commits the journal and tells the peers (End), and they
// drop the run's results (ack.go).
//
// A task's record (report.Task: state, attempts, votes, ...) is in
// memory only while the task is at work (records.go): a task never tried
// has none, and a decided task's record leaves memory once journaled; it
// is read back from job.db when asked for again (a reopened vote, the web
// view). The queue reaches records through sched.Records. report.json,
// the run's summary and the reduce step read the tasks a record at a
// time from job.db (jobdb's EachTask): a job of a million tasks costs
// the coordinator about a hundred bytes per task.
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
// The digest of a task's output is the SHA-256 of its canonical listing
// (internal/outputs): one line "<sha256 of file> <size> <len>:<name>\n"
// per file, sorted by name. A resumed run also accepts an earlier run's
// digest of listing version 1 (no length) for the same files.
// Lock order: sched.Queue's, then runner.mu (its ReportLock), then jobdb's; remoteWorker.mu also under the queue's (OnRevoke); other mutexes are leaves.
package job
