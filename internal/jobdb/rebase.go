package jobdb

import (
	"context"
	"fmt"

	"github.com/p2pc/p2pc/internal/report"
)

// Rebase makes the job database at path hold an edited job (ID jobID):
// of its tasks it keeps those in keep (by their index in the database:
// their index in the edited job), renumbered, with their attempts,
// votes, partial results and inline outputs, and drops every other
// task's rows, the shared state (the vc_ tables: an earlier job's), and
// the earlier run's name and peer sessions (the edited job is a new
// run). It is one transaction: the database holds the earlier job or the
// edited one, never a mix. The database is migrated first, as Open does;
// no writer may have it open.
func Rebase(ctx context.Context, path, jobID string, keep map[int]int, opts Options) error {
	db, err := openWritable(ctx, path, &opts)
	if err != nil {
		return err
	}
	defer db.sql.Close()
	tx, err := db.sql.BeginTx(ctx, nil)
	if err != nil {
		return db.wrap("rebase", err)
	}
	defer tx.Rollback()
	exec := func(q string, args ...any) error {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return db.wrap("rebase", err)
		}
		return nil
	}
	if err := exec(`CREATE TEMP TABLE rebase(old INTEGER PRIMARY KEY, new INTEGER NOT NULL UNIQUE)`); err != nil {
		return err
	}
	for old, idx := range keep {
		if err := exec(`INSERT INTO rebase(old, new) VALUES (?, ?)`, old, idx); err != nil {
			return err
		}
	}
	// Renumbered through negative indexes, so that no row meets another's
	// key on the way.
	for _, t := range []struct{ table, col string }{
		{"tasks", "idx"}, {"attempts", "task"}, {"votes", "task"}, {"partials", "task"}, {"outputs", "task"},
	} {
		if err := exec(fmt.Sprintf(`DELETE FROM %s WHERE %s NOT IN (SELECT old FROM rebase)`, t.table, t.col)); err != nil {
			return err
		}
		if err := exec(fmt.Sprintf(`UPDATE %[1]s SET %[2]s = -1 - (SELECT new FROM rebase WHERE old = %[1]s.%[2]s)`, t.table, t.col)); err != nil {
			return err
		}
		if err := exec(fmt.Sprintf(`UPDATE %s SET %s = -1 - %[2]s`, t.table, t.col)); err != nil {
			return err
		}
	}
	for _, table := range []string{"vc_globals", "vc_messages", "vc_checkpoints", "vc_ops"} {
		if err := exec(`DELETE FROM ` + table); err != nil {
			return err
		}
	}
	if err := exec(`DELETE FROM job WHERE key IN ('run', ?)`, SessionsKey); err != nil {
		return err
	}
	if err := exec(qJob, "job_id", jobID); err != nil {
		return err
	}
	if err := exec(`DROP TABLE temp.rebase`); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return db.wrap("rebase", err)
	}
	return nil
}

// SharedState says whether the job kept state its tasks share (globals,
// messages or operations of package vc): then a task's output may depend
// on other tasks, not only on its key.
func (db *DB) SharedState(ctx context.Context) (bool, error) {
	if v, err := db.Version(ctx); err != nil || v < 2 {
		return false, err
	}
	var n int
	err := db.sql.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM (SELECT 1 FROM vc_globals LIMIT 1))
		+ (SELECT count(*) FROM (SELECT 1 FROM vc_messages LIMIT 1)) + (SELECT count(*) FROM (SELECT 1 FROM vc_ops LIMIT 1))`).Scan(&n)
	if err != nil {
		return false, db.wrap("read shared state", err)
	}
	return n > 0, nil
}

// MarkReused queues the marking of every task held as done as reused:
// at a run's start, before any task is written, they are an earlier
// run's (a task this run then writes again has its mark from its record).
func (db *DB) MarkReused() error {
	return db.w.put(change{apply: func(tx *batch) error {
		return tx.exec(`UPDATE tasks SET reused = 1 WHERE state = ? AND reused = 0`, report.TaskDone)
	}})
}

// PutKey queues task idx's key, for a row of a p2pc that kept none.
func (db *DB) PutKey(idx int, key [32]byte) error {
	return db.w.put(change{apply: func(tx *batch) error {
		return tx.exec(`UPDATE tasks SET key = ? WHERE idx = ?`, key[:], idx)
	}})
}
