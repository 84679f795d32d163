// Package jobdb keeps a job's state in an embedded SQLite database,
// OUT/job.db, through the pure-Go driver modernc.org/sqlite.
//
// Ownership: the coordinator is the only writer, and all its changes go
// through one writer goroutine that commits them in batches (group
// commit). Attempts are appended, never rewritten. Readers such as
// `p2pc status` may read while a run writes: the database is in WAL mode,
// and a committed batch survives the coordinator's SIGKILL.
//
// Invariants: nothing is overwritten silently. Open migrates an older
// schema, refuses one written by a newer p2pc (ErrNewer), and reports a
// file that is not a readable SQLite database as ErrCorrupt. An error of
// the writer, such as a full disk (ErrFull), is sticky: every later call
// reports it.
//
// The schema is a documented interface (docs/report.md); its version is
// SchemaVersion. docs/design/jobdb.md describes the writer and the readers.
package jobdb
