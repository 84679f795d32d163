package jobdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// A task's rows, read back: the queries (each ends where a WHERE or an
// ORDER BY may follow) and their scanners, shared by Load, LoadTask and
// EachTask.
const (
	qReadTasks = `SELECT idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, key, reused FROM tasks`
	// qReadTasksV3: schema 3 and older (read-only) lack key and reused.
	qReadTasksV3  = `SELECT idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, NULL, 0 FROM tasks`
	qReadAttempts = `SELECT task, peer, peer_id, start, end, outcome, error, resumed, trusted, handed_over, device FROM attempts`
	// qReadAttemptsV4: schema 4 and older (read-only) lack device;
	// qReadAttemptsV2: schema 2 and older lack handed_over too.
	qReadAttemptsV4 = `SELECT task, peer, peer_id, start, end, outcome, error, resumed, trusted, handed_over, '' FROM attempts`
	qReadAttemptsV2 = `SELECT task, peer, peer_id, start, end, outcome, error, resumed, trusted, 0, '' FROM attempts`
	qReadVotes      = `SELECT task, peer, peer_id, digest FROM votes`
	qReadPartials   = `SELECT task, time, peer, peer_id, text, bytes, truncated FROM partials`
)

// filesError: a task's files column is not a JSON list.
type filesError struct{ err error }

func (e filesError) Error() string { return "files: " + e.err.Error() }
func (e filesError) Unwrap() error { return e.err }

// taskErr wraps an error of reading task id's row.
func (db *DB) taskErr(id string, err error) error {
	var fe filesError
	if errors.As(err, &fe) {
		return fmt.Errorf("job database %s: task %s: %w", db.path, id, fe)
	}
	return db.wrap("read tasks", err)
}

// scanTask reads a row of qReadTasks into t (its Attempts empty, not nil)
// and returns the task's index.
func scanTask(rows *sql.Rows, t *report.Task) (int, error) {
	var i int
	var params string
	var files sql.NullString
	var key []byte
	if err := rows.Scan(&i, &t.ID, &params, &t.State, &t.Peer, &t.PeerID, &t.Digest, &files, &t.Error, &t.Verdict, &t.Checkpoints, &key, &t.Reused); err != nil {
		return 0, err
	}
	if len(key) == len(t.Key) {
		t.Key = [32]byte(key)
	}
	t.Params = json.RawMessage(params)
	if files.Valid {
		if err := json.Unmarshal([]byte(files.String), &t.Files); err != nil {
			return i, filesError{err}
		}
	}
	t.Attempts = []report.Attempt{}
	return i, nil
}

// scanAttempt reads a row of qReadAttempts and returns its task's index.
func scanAttempt(rows *sql.Rows, a *report.Attempt) (int, error) {
	var i int
	var start, end string
	if err := rows.Scan(&i, &a.Peer, &a.PeerID, &start, &end, &a.Outcome, &a.Error, &a.Resumed, &a.Check, &a.HandedOver, &a.Device); err != nil {
		return 0, err
	}
	a.Start, a.End = parseTime(start), parseTime(end)
	return i, nil
}

// scanVote reads a row of qReadVotes and returns its task's index.
func scanVote(rows *sql.Rows, v *report.Vote) (int, error) {
	var i int
	err := rows.Scan(&i, &v.Peer, &v.PeerID, &v.Digest)
	return i, err
}

// scanPartial reads a row of qReadPartials and returns its task's index.
func scanPartial(rows *sql.Rows, p *report.Partial) (int, error) {
	var i int
	var tm string
	var text sql.NullString
	if err := rows.Scan(&i, &tm, &p.Peer, &p.PeerID, &text, &p.Bytes, &p.Truncated); err != nil {
		return 0, err
	}
	p.Time, p.Text = parseTime(tm), text.String
	return i, nil
}

// LoadTask reads task idx back as its record, with its attempts, votes
// and partial results (found false: the task has no row). It reads what
// is committed: Flush first to read one's own latest changes.
func (db *DB) LoadTask(ctx context.Context, idx int) (t *report.Task, found bool, err error) {
	t = &report.Task{}
	rows, err := db.sql.QueryContext(ctx, db.qTasks+` WHERE idx = ?`, idx)
	if err != nil {
		return nil, false, db.wrap("read task", err)
	}
	if rows.Next() {
		found = true
		if _, err := scanTask(rows, t); err != nil {
			rows.Close()
			return nil, false, db.taskErr(t.ID, err)
		}
	}
	if err := closeRows(rows); err != nil {
		return nil, false, db.wrap("read task", err)
	}
	if !found {
		return nil, false, nil
	}
	if err := db.each(ctx, db.qAttempts+` WHERE task = ? ORDER BY n`, func(rows *sql.Rows) error {
		var a report.Attempt
		_, err := scanAttempt(rows, &a)
		t.Attempts = append(t.Attempts, a)
		return err
	}, idx); err != nil {
		return nil, false, err
	}
	if err := db.each(ctx, qReadVotes+` WHERE task = ? ORDER BY n`, func(rows *sql.Rows) error {
		var v report.Vote
		_, err := scanVote(rows, &v)
		t.Votes = append(t.Votes, v)
		return err
	}, idx); err != nil {
		return nil, false, err
	}
	if err := db.each(ctx, qReadPartials+` WHERE task = ? ORDER BY n`, func(rows *sql.Rows) error {
		var p report.Partial
		_, err := scanPartial(rows, &p)
		t.Partials = append(t.Partials, p)
		return err
	}, idx); err != nil {
		return nil, false, err
	}
	return t, true, nil
}

// cursor walks one of a task's tables in task order, a row ahead.
type cursor struct {
	rows *sql.Rows
	task int // the task of the row read ahead; -1 at the end
	scan func(rows *sql.Rows) (int, error)
}

func (c *cursor) next() error {
	if !c.rows.Next() {
		c.task = -1
		return c.rows.Err()
	}
	var err error
	c.task, err = c.scan(c.rows)
	return err
}

// EachTask calls fn with every task's record, in task order, as Load
// reads it, holding one task in memory at a time (report.json of a
// million tasks is written from it). The record is fn's only until fn
// returns. It keeps four queries open at once: it needs a database
// opened by OpenReadOnly (a writer's has one connection).
func (db *DB) EachTask(ctx context.Context, fn func(idx int, t *report.Task) error) error {
	if v, err := db.Version(ctx); err != nil || v == 0 {
		return err // made, but killed before its first commit: no task
	}
	var t report.Task
	var a report.Attempt
	var v report.Vote
	var p report.Partial
	curs := []*cursor{
		{scan: func(rows *sql.Rows) (int, error) { return scanAttempt(rows, &a) }},
		{scan: func(rows *sql.Rows) (int, error) { return scanVote(rows, &v) }},
		{scan: func(rows *sql.Rows) (int, error) { return scanPartial(rows, &p) }},
	}
	for i, q := range []string{db.qAttempts, qReadVotes, qReadPartials} {
		rows, err := db.sql.QueryContext(ctx, q+` ORDER BY task, n`)
		if err != nil {
			return db.wrap("read tasks", err)
		}
		defer rows.Close()
		curs[i].rows = rows
		if err := curs[i].next(); err != nil {
			return db.wrap("read tasks", err)
		}
	}
	rows, err := db.sql.QueryContext(ctx, db.qTasks+` ORDER BY idx`)
	if err != nil {
		return db.wrap("read tasks", err)
	}
	defer rows.Close()
	for rows.Next() {
		t = report.Task{}
		idx, err := scanTask(rows, &t)
		if err != nil {
			return db.taskErr(t.ID, err)
		}
		// Rows of tasks that have no task row (none are written so) are
		// skipped, as Load skips them.
		for c, add := range []func(){
			func() { t.Attempts = append(t.Attempts, a) },
			func() { t.Votes = append(t.Votes, v) },
			func() { t.Partials = append(t.Partials, p) },
		} {
			cur := curs[c]
			for cur.task != -1 && cur.task <= idx {
				if cur.task == idx {
					add()
				}
				if err := cur.next(); err != nil {
					return db.wrap("read tasks", err)
				}
			}
		}
		if err := fn(idx, &t); err != nil {
			return err
		}
	}
	if err := closeRows(rows); err != nil {
		return db.wrap("read tasks", err)
	}
	return nil
}

// Head reads the job-level fields and the summary's counts, as Load
// gives them, without the tasks (Tasks is empty): the head of report.json,
// whose tasks EachTask streams. The counts are by SQL, so that a job of a
// million tasks costs no more memory than one of ten.
func (db *DB) Head(ctx context.Context) (*report.Report, error) {
	r, err := db.LoadJob(ctx)
	if err != nil || r.JobID == "" {
		return r, err
	}
	by, rows, err := db.stateCounts(ctx)
	if err != nil {
		return r, err
	}
	r.Summary.Done, r.Summary.Failed = by[report.TaskDone], by[report.TaskFailed]
	r.Summary.Total = max(r.Summary.Total, rows)
	r.Summary.Reused, err = db.countReused(ctx)
	return r, err
}

// countReused counts the done tasks the last run reused.
func (db *DB) countReused(ctx context.Context) (int, error) {
	if db.qTasks != qReadTasks {
		return 0, nil // an older schema: none
	}
	var n int
	err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM tasks WHERE state = ? AND reused != 0", report.TaskDone).Scan(&n)
	if err != nil {
		return 0, db.wrap("count reused tasks", err)
	}
	return n, nil
}

// Shares counts the tasks each peer produced the accepted result of in
// the last run (a reused task's result is an earlier run's), by peer name
// (report.json's tasks[].peer).
func (db *DB) Shares(ctx context.Context) (map[string]int, error) {
	count := map[string]int{}
	q := `SELECT peer, count(*) FROM tasks WHERE peer != '' AND reused = 0 GROUP BY peer`
	if db.qTasks != qReadTasks {
		q = `SELECT peer, count(*) FROM tasks WHERE peer != '' GROUP BY peer` // an older schema
	}
	err := db.each(ctx, q, func(rows *sql.Rows) error {
		var p string
		var n int
		if err := rows.Scan(&p, &n); err != nil {
			return err
		}
		count[p] += n
		return nil
	})
	return count, err
}

// Failed reads the first n failed tasks' records, in task order.
func (db *DB) Failed(ctx context.Context, n int) ([]*report.Task, error) {
	var idx []int
	if err := db.each(ctx, `SELECT idx FROM tasks WHERE state = ? ORDER BY idx LIMIT ?`, func(rows *sql.Rows) error {
		var i int
		err := rows.Scan(&i)
		idx = append(idx, i)
		return err
	}, report.TaskFailed, n); err != nil {
		return nil, err
	}
	var out []*report.Task
	for _, i := range idx {
		t, found, err := db.LoadTask(ctx, i)
		if err != nil {
			return out, err
		}
		if found {
			out = append(out, t)
		}
	}
	return out, nil
}

// DoneRow is a task the database holds as done: what a rerun may reuse.
type DoneRow struct {
	Idx    int
	ID     string
	Digest string
	// Key is the task's key; zero in a row of a p2pc that kept none.
	Key [32]byte
}

// Done calls fn with every task the database holds as done with a
// digest, in task order (what a rerun may reuse).
func (db *DB) Done(ctx context.Context, fn func(DoneRow) error) error {
	key := "key"
	if db.qTasks != qReadTasks {
		key = "NULL" // an older schema: no keys
	}
	return db.each(ctx, `SELECT idx, id, digest, `+key+` FROM tasks WHERE state = ? AND digest != '' ORDER BY idx`, func(rows *sql.Rows) error {
		var d DoneRow
		var k []byte
		if err := rows.Scan(&d.Idx, &d.ID, &d.Digest, &k); err != nil {
			return err
		}
		if len(k) == len(d.Key) {
			d.Key = [32]byte(k)
		}
		return fn(d)
	}, report.TaskDone)
}

// AsStored returns task t as EachTask reads it back once PutTask wrote it
// (t itself when that is t's encoding in report.json already, else a
// copy that shares what it does not change): times in UTC, no parameters
// as null, no attempts as an empty list, a partial result's text dropped
// when it has bytes. A run writes report.json from the records it holds
// through it, and `p2pc report` from the database: the same bytes.
func AsStored(t *report.Task) *report.Task {
	utc := func(tm time.Time) bool { return tm.Location() == time.UTC }
	same := len(t.Params) > 0 && t.Attempts != nil
	for _, a := range t.Attempts {
		same = same && utc(a.Start) && utc(a.End)
	}
	for _, p := range t.Partials {
		same = same && utc(p.Time) && (p.Bytes == nil || p.Text == "")
	}
	if same {
		return t
	}
	c := *t
	if len(c.Params) == 0 {
		c.Params = json.RawMessage("null")
	}
	c.Attempts = make([]report.Attempt, len(t.Attempts))
	for i, a := range t.Attempts {
		a.Start, a.End = parseTime(fmtTime(a.Start)), parseTime(fmtTime(a.End))
		c.Attempts[i] = a
	}
	c.Partials = slices.Clone(t.Partials)
	for i := range c.Partials {
		p := &c.Partials[i]
		p.Time = parseTime(fmtTime(p.Time))
		if p.Bytes != nil {
			p.Text = ""
		}
	}
	return &c
}
