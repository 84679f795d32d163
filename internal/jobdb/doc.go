// Package jobdb keeps a job's state in an embedded SQLite database,
// OUT/job.db, through the pure-Go driver modernc.org/sqlite (no cgo).
//
// The coordinator is its only writer. Changes go through one writer
// goroutine that batches them into one transaction every few
// milliseconds (group commit): many changes to one task inside a batch
// cost one write. The writer remembers what it wrote of each task, so a
// task that finished writes its row (an upsert that changes its state
// columns) and its new attempt, and nothing else: attempts are appended,
// never rewritten. Inserts and upserts of a batch go in prepared
// statements of many rows (32, the rest in powers of two), sorted by
// task (neighbouring rows: fewer pages changed), and the batch's rows
// carry one write time. The writer executes them on the driver's
// connection directly (sql.Conn.Raw), without database/sql's copy and
// check of every argument; the statement journals that statements of
// many rows keep are in memory (temp_store=MEMORY). The database is in
// WAL mode with synchronous=NORMAL: a committed batch survives the
// coordinator's SIGKILL (not necessarily a power cut), and readers such as
// `p2pc status` read it while the run writes.
//
// Reading back: Load reads the whole job as a report; EachTask streams
// the tasks a record at a time (four queries merged in task order:
// report.json of a million tasks is written from it without holding
// them), LoadTask reads one (the coordinator's records of decided tasks
// live here, not in its memory), Shares and Failed what a run's summary
// says, Head the job's fields and counts (by SQL) that head report.json;
// StreamReport hands a head and its stream of tasks to an encoder
// (`p2pc report`).
//
// A task's key (package job's TaskKey, NULL when a p2pc without keys
// wrote the row) lets an edited job keep the tasks it did not change:
// Rebase renumbers the kept tasks' rows to their places in the edited job
// and drops every other task's, in one transaction. MarkReused marks, at a
// run's start, the done tasks as an earlier run's (report.json's reused).
//
// The schema is a documented interface (docs/report.md). Its version
// lives in the table schema_version; Open migrates an older database and
// refuses one written by a newer p2pc (ErrNewer), and a file that is not a
// readable SQLite database gives ErrCorrupt: nothing is ever overwritten
// silently. Errors of the writer (a full disk: ErrFull) are sticky: every
// later call reports them, and the run stops.
//
// Tables (version 4; version 3 lacked tasks.key and tasks.reused,
// version 2 attempts.handed_over too, version 1 the vc_ tables too):
//
//	schema_version(version, p2pc, applied)
//	job(key, value)                        job metadata, one row per field
//	tasks(idx, id, params, state, peer, peer_id, digest, files, error,
//	      verdict, checkpoints, updated, key, reused)
//	attempts(task, n, peer, peer_id, start, end, outcome, error, resumed,
//	         trusted, handed_over)
//	votes(task, n, peer, peer_id, digest)
//	partials(task, n, time, peer, peer_id, text, bytes, truncated)
//	outputs(task, name, data)              inline task outputs
//	vc_globals(key, version, value)        the virtual computer's state
//	vc_messages(task, seq, sender, data)   (package vc), journaled in the
//	vc_checkpoints(task, seq, pos, time,   order it changes, through the
//	               block, state)           same group commit (keyless
//	vc_ops(task, n, op, key, ok, version,  changes: none replaces another)
//	       value, error)
//
// Times are UTC text of a fixed width ("2006-01-02T15:04:05.000000000Z"),
// so they sort as text and SQLite's date functions read them.
package jobdb
