package jobdb

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// The writer's statements, prepared once (writeQueries).
const (
	qJob          = "INSERT OR REPLACE INTO job(key, value) VALUES (?, ?)"
	qPutOutput    = "INSERT OR REPLACE INTO outputs(task, name, data) VALUES (?, ?, ?)"
	qDeleteOutput = "DELETE FROM outputs WHERE task = ?"
	qTask         = `INSERT OR REPLACE INTO tasks(idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, updated, key, reused) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// qTaskUpdate updates a row this writer wrote: an upsert, so that a
	// batch's updates go many rows to a statement (batch.insert); id and
	// params, set when the row was written, stay. The key is written
	// again: a streamed stage's task has its key once it is released.
	qTaskUpdate = `INSERT INTO tasks(idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, updated, key, reused) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)` +
		` ON CONFLICT(idx) DO UPDATE SET state = excluded.state, peer = excluded.peer, peer_id = excluded.peer_id, digest = excluded.digest, files = excluded.files,` +
		` error = excluded.error, verdict = excluded.verdict, checkpoints = excluded.checkpoints, updated = excluded.updated, key = excluded.key, reused = excluded.reused`
	// qTaskV3 and qTaskUpdateV3: schema 3 and older lack key and reused.
	qTaskV3       = `INSERT OR REPLACE INTO tasks(idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qTaskUpdateV3 = `INSERT INTO tasks(idx, id, params, state, peer, peer_id, digest, files, error, verdict, checkpoints, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)` +
		` ON CONFLICT(idx) DO UPDATE SET state = excluded.state, peer = excluded.peer, peer_id = excluded.peer_id, digest = excluded.digest, files = excluded.files,` +
		` error = excluded.error, verdict = excluded.verdict, checkpoints = excluded.checkpoints, updated = excluded.updated`
	qAttempt = `INSERT OR REPLACE INTO attempts(task, n, peer, peer_id, start, end, outcome, error, resumed, trusted, handed_over, device) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// qAttemptV4: schema 4 and older lack device; qAttemptV2: schema 2
	// and older lack handed_over too (a writer meets them only in tests
	// that make a database of an older schema).
	qAttemptV4      = `INSERT OR REPLACE INTO attempts(task, n, peer, peer_id, start, end, outcome, error, resumed, trusted, handed_over) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qAttemptV2      = `INSERT OR REPLACE INTO attempts(task, n, peer, peer_id, start, end, outcome, error, resumed, trusted) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qVote           = `INSERT INTO votes(task, n, peer, peer_id, digest) VALUES (?, ?, ?, ?, ?)`
	qPartial        = `INSERT INTO partials(task, n, time, peer, peer_id, text, bytes, truncated) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	qDeleteAttempts = "DELETE FROM attempts WHERE task = ? AND n >= ?"
	qDeleteVotes    = "DELETE FROM votes WHERE task = ?"
	qDeletePartials = "DELETE FROM partials WHERE task = ?"
)

// multiRowQueries are the inserts that a batch gathers into statements of
// many rows (batch.insert).
var multiRowQueries = []string{qPutOutput, qTask, qTaskUpdate, qAttempt, qVote}

var writeQueries = []string{qJob, qPutOutput, qDeleteOutput, qTask, qTaskUpdate, qAttempt, qVote, qPartial, qDeleteAttempts, qDeleteVotes, qDeletePartials}

// PutJob queues the report's job-level fields (everything but the tasks)
// as rows of the table job, unless they are what it queued last. It
// copies what it needs before it returns.
func (db *DB) PutJob(r *report.Report) error {
	rows, err := jobRows(r)
	if err != nil {
		return err
	}
	db.jobMu.Lock()
	same := slices.Equal(rows, db.lastJob)
	db.lastJob = rows
	db.jobMu.Unlock()
	if same {
		return db.w.failed()
	}
	return db.w.put(change{key: changeKey{kind: keyJob}, apply: func(tx *batch) error {
		for _, kv := range rows {
			if err := tx.exec(qJob, kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	}})
}

// SessionsKey is the job row that lists the peers (name@id) the run's
// latest coordinator had sessions with, as a JSON array: a rerun waits for
// them to hand over what they finished while it was gone.
const SessionsKey = "sessions"

// StageKey is the job row that names a stage's job database as such:
// "<job>/<stage>" (a job with stages keeps one job database per stage).
const StageKey = "stage"

// PutJobValue queues one row of the table job that is not a report field
// (SessionsKey).
func (db *DB) PutJobValue(key, value string) error {
	return db.w.put(change{key: changeKey{kind: keyJobValue, name: key}, apply: func(tx *batch) error {
		return tx.exec(qJob, key, value)
	}})
}

// JobValue reads one row of the table job ("" when there is none).
func (db *DB) JobValue(ctx context.Context, key string) (string, error) {
	var v string
	err := db.sql.QueryRowContext(ctx, "SELECT value FROM job WHERE key = ?", key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", db.wrap("read job "+key, err)
	}
	return v, nil
}

func jobRows(r *report.Report) ([][2]string, error) {
	js := func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	}
	rows := [][2]string{
		{"format", strconv.Itoa(r.Format)},
		{"job_id", r.JobID},
		{"name", r.Name},
		{"spec", r.Spec},
		{"state", r.State},
		{"error", r.Error},
		{"started", fmtTime(r.Started)},
		{"finished", fmtTime(r.Finished)},
		{"node", r.Node},
		{"run", r.Run},
		{"total", strconv.Itoa(r.Summary.Total)},
	}
	for _, kv := range []struct {
		k string
		v any
	}{{"plugin", r.Plugin}, {"outputs", r.Outputs}, {"warnings", r.Warnings}, {"excluded", r.Excluded}, {"peers", r.Peers}, {"spot_checks", r.SpotChecks}} {
		s, err := js(kv.v)
		if err != nil {
			return nil, fmt.Errorf("encode job %s: %w", kv.k, err)
		}
		rows = append(rows, [2]string{kv.k, s})
	}
	return rows, nil
}

// PutTask queues task idx's row with its attempts, votes and partial
// results, replacing what was stored. It copies t before it returns, so
// the caller may change t at once.
//
// Attempts are a log: an attempt PutTask wrote once is not written again
// (a task whose attempts grew by one costs its row and that attempt's
// row), so the caller changes an attempt only before the task is put
// with it. Votes and partial results are rewritten whole when they
// change in number.
func (db *DB) PutTask(idx int, t *report.Task) error {
	c := copyTask(t)
	return db.w.put(change{key: changeKey{kind: keyTask, idx: idx}, apply: func(tx *batch) error {
		return writeTask(tx, idx, &c)
	}})
}

// PutOutput queues task idx's inline output (one file, name, holding
// data), replacing the one stored.
func (db *DB) PutOutput(idx int, name string, data []byte) error {
	data = slices.Clone(data)
	if data == nil {
		data = []byte{}
	}
	return db.w.put(change{key: changeKey{kind: keyOutput, idx: idx}, apply: func(tx *batch) error {
		err := tx.insert(qPutOutput, idx, name, data)
		return err
	}})
}

// DeleteOutput queues the removal of task idx's inline output.
func (db *DB) DeleteOutput(idx int) error {
	return db.w.put(change{key: changeKey{kind: keyOutput, idx: idx}, apply: func(tx *batch) error {
		err := tx.exec(qDeleteOutput, idx)
		return err
	}})
}

func copyTask(t *report.Task) report.Task {
	c := *t
	c.Params = slices.Clone(t.Params)
	c.Attempts = slices.Clone(t.Attempts)
	c.Files = slices.Clone(t.Files)
	c.Votes = slices.Clone(t.Votes)
	c.Partials = slices.Clone(t.Partials)
	for i := range c.Partials {
		c.Partials[i].Bytes = slices.Clone(c.Partials[i].Bytes)
	}
	return c
}

func writeTask(tx *batch, idx int, t *report.Task) error {
	var files any
	if t.Files != nil {
		b, err := json.Marshal(t.Files)
		if err != nil {
			return err
		}
		files = string(b)
	}
	rows := tx.w.rowsOf(idx)
	defer func() { tx.w.rows.set(idx, rows) }()
	peer, peerID := split(t.Peer, t.PeerID)
	params := string(t.Params)
	if params == "" {
		params = "null"
	}
	q := tx.w.qTask
	if rows.row {
		q = tx.w.qTaskUpdate
	}
	args := []any{idx, t.ID, params, t.State, peer, peerID, t.Digest, files, t.Error, t.Verdict, t.Checkpoints, tx.now}
	if q == qTask || q == qTaskUpdate {
		var key any // NULL: no key (a record of a p2pc that kept none)
		if t.Key != ([32]byte{}) {
			key = t.Key[:]
		}
		args = append(args, key, t.Reused)
	}
	if err := tx.insert(q, args...); err != nil {
		return err
	}
	rows.row = true
	from := int(rows.attempts)
	if from < 0 || from > len(t.Attempts) {
		if err := tx.exec(qDeleteAttempts, idx, len(t.Attempts)); err != nil {
			return err
		}
		from = 0
	}
	for n := from; n < len(t.Attempts); n++ {
		a := &t.Attempts[n]
		peer, peerID := split(a.Peer, a.PeerID)
		args := []any{idx, n, peer, peerID, fmtTime(a.Start), fmtTime(a.End), a.Outcome, a.Error, a.Resumed, a.Check, a.HandedOver, a.Device}
		switch tx.w.qAttempt {
		case qAttemptV4:
			args = args[:len(args)-1]
		case qAttemptV2:
			args = args[:len(args)-2]
		}
		if err := tx.insert(tx.w.qAttempt, args...); err != nil {
			return err
		}
	}
	rows.attempts = int32(len(t.Attempts))
	if int(rows.votes) != len(t.Votes) || len(t.Votes) > 0 {
		// Votes are few and change whole (a vote is recounted): rewritten.
		if rows.votes != 0 {
			if err := tx.exec(qDeleteVotes, idx); err != nil {
				return err
			}
		}
		for n, v := range t.Votes {
			peer, peerID := split(v.Peer, v.PeerID)
			if err := tx.insert(qVote,
				idx, n, peer, peerID, v.Digest); err != nil {
				return err
			}
		}
		rows.votes = int32(len(t.Votes))
	}
	if int(rows.partials) != len(t.Partials) || len(t.Partials) > 0 {
		// Partial results shift when the oldest is dropped: rewritten.
		if rows.partials != 0 {
			if err := tx.exec(qDeletePartials, idx); err != nil {
				return err
			}
		}
		for n, p := range t.Partials {
			peer, peerID := split(p.Peer, p.PeerID)
			var text, raw any
			if p.Bytes != nil {
				raw = p.Bytes
			} else {
				text = p.Text
			}
			if err := tx.exec(qPartial,
				idx, n, fmtTime(p.Time), peer, peerID, text, raw, p.Truncated); err != nil {
				return err
			}
		}
		rows.partials = int32(len(t.Partials))
	}
	return nil
}

// split stores a coordinator's peer key "name@NODEID" as name and ID.
func split(peer, id string) (string, string) {
	if id != "" {
		return peer, id
	}
	return report.SplitPeer(peer)
}

// Load reads the whole job back as a report (the content of
// report.json). A database that holds no job yet gives a report with
// an empty JobID. When reading fails part way (a corrupted database),
// the error comes with what was read before it.
func (db *DB) Load(ctx context.Context) (*report.Report, error) {
	v, err := db.Version(ctx)
	if err != nil || v == 0 {
		return &report.Report{Tasks: []report.Task{}}, err // made, but killed before its first commit
	}
	r, err := db.LoadJob(ctx)
	if err != nil {
		return r, err
	}
	idx := map[int]int{}
	rows, err := db.sql.QueryContext(ctx, db.qTasks+` ORDER BY idx`)
	if err != nil {
		return nil, db.wrap("read tasks", err)
	}
	for rows.Next() {
		var t report.Task
		i, err := scanTask(rows, &t)
		if err != nil {
			rows.Close()
			return r, db.taskErr(t.ID, err)
		}
		idx[i] = len(r.Tasks)
		r.Tasks = append(r.Tasks, t)
		switch t.State {
		case report.TaskDone:
			r.Summary.Done++
			if t.Reused {
				r.Summary.Reused++
			}
		case report.TaskFailed:
			r.Summary.Failed++
		}
	}
	if err := closeRows(rows); err != nil {
		return r, db.wrap("read tasks", err)
	}
	if r.Summary.Total < len(r.Tasks) {
		r.Summary.Total = len(r.Tasks)
	}
	if err := db.each(ctx, db.qAttempts+` ORDER BY task, n`, func(rows *sql.Rows) error {
		var a report.Attempt
		i, err := scanAttempt(rows, &a)
		if err != nil {
			return err
		}
		if j, ok := idx[i]; ok {
			r.Tasks[j].Attempts = append(r.Tasks[j].Attempts, a)
		}
		return nil
	}); err != nil {
		return r, err
	}
	if err := db.each(ctx, qReadVotes+` ORDER BY task, n`, func(rows *sql.Rows) error {
		var v report.Vote
		i, err := scanVote(rows, &v)
		if err != nil {
			return err
		}
		if j, ok := idx[i]; ok {
			r.Tasks[j].Votes = append(r.Tasks[j].Votes, v)
		}
		return nil
	}); err != nil {
		return r, err
	}
	if err := db.each(ctx, qReadPartials+` ORDER BY task, n`, func(rows *sql.Rows) error {
		var p report.Partial
		i, err := scanPartial(rows, &p)
		if err != nil {
			return err
		}
		if j, ok := idx[i]; ok {
			r.Tasks[j].Partials = append(r.Tasks[j].Partials, p)
		}
		return nil
	}); err != nil {
		return r, err
	}
	return r, nil
}

// LoadJob reads the job-level fields only (Tasks is empty; Summary.Total
// is the job's task count).
func (db *DB) LoadJob(ctx context.Context) (*report.Report, error) {
	r := &report.Report{Tasks: []report.Task{}}
	if v, err := db.Version(ctx); err != nil || v == 0 {
		return r, err // made, but killed before its first commit
	}
	err := db.each(ctx, "SELECT key, value FROM job", func(rows *sql.Rows) error {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		var err error
		switch k {
		case "format":
			r.Format, err = strconv.Atoi(v)
		case "job_id":
			r.JobID = v
		case "name":
			r.Name = v
		case "spec":
			r.Spec = v
		case "state":
			r.State = v
		case "error":
			r.Error = v
		case "started":
			r.Started = parseTime(v)
		case "finished":
			r.Finished = parseTime(v)
		case "node":
			r.Node = v
		case "run":
			r.Run = v
		case "total":
			r.Summary.Total, err = strconv.Atoi(v)
		case "plugin":
			err = json.Unmarshal([]byte(v), &r.Plugin)
		case "outputs":
			err = json.Unmarshal([]byte(v), &r.Outputs)
		case "warnings":
			err = json.Unmarshal([]byte(v), &r.Warnings)
		case "excluded":
			err = json.Unmarshal([]byte(v), &r.Excluded)
		case "peers":
			err = json.Unmarshal([]byte(v), &r.Peers)
		case "spot_checks":
			err = json.Unmarshal([]byte(v), &r.SpotChecks)
		}
		if err != nil {
			return fmt.Errorf("job field %s: %w", k, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Output returns task idx's inline output, or found false.
func (db *DB) Output(ctx context.Context, idx int) (name string, data []byte, found bool, err error) {
	err = db.sql.QueryRowContext(ctx, "SELECT name, data FROM outputs WHERE task = ?", idx).Scan(&name, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, db.wrap("read output", err)
	}
	if data == nil {
		data = []byte{}
	}
	return name, data, true, nil
}

// Output is one task's inline output.
type Output struct {
	Idx    int
	TaskID string
	Params json.RawMessage
	Name   string
	Data   []byte
}

// Outputs calls fn for every inline output, in task order.
func (db *DB) Outputs(ctx context.Context, fn func(Output) error) error {
	return db.each(ctx, "SELECT o.task, t.id, t.params, o.name, o.data FROM outputs o JOIN tasks t ON t.idx = o.task ORDER BY o.task", func(rows *sql.Rows) error {
		var o Output
		var params string
		if err := rows.Scan(&o.Idx, &o.TaskID, &params, &o.Name, &o.Data); err != nil {
			return err
		}
		o.Params = json.RawMessage(params)
		if o.Data == nil {
			o.Data = []byte{}
		}
		return fn(o)
	})
}

// each runs query and calls fn per row.
func (db *DB) each(ctx context.Context, query string, fn func(*sql.Rows) error, args ...any) error {
	rows, err := db.sql.QueryContext(ctx, query, args...)
	if err != nil {
		return db.wrap("read", err)
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			rows.Close()
			return db.wrap("read", err)
		}
	}
	if err := closeRows(rows); err != nil {
		return db.wrap("read", err)
	}
	return nil
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// Status is a job's state at a glance (p2pc status).
type Status struct {
	JobID    string    `json:"job_id"`
	Name     string    `json:"name"`
	State    string    `json:"state"`
	Error    string    `json:"error,omitempty"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	Total    int       `json:"total"`
	Done     int       `json:"done"`
	Failed   int       `json:"failed"`
	Running  int       `json:"running"`
	Queued   int       `json:"queued"`
	// Rate is tasks done per second over the last Window.
	Rate   float64       `json:"rate"`
	Window time.Duration `json:"window_ns"`
	// ETA is the time left at Rate (0: unknown or nothing left).
	ETA      time.Duration `json:"eta_ns,omitempty"`
	Failures []Failure     `json:"failures,omitempty"`
}

// Failure is one failed attempt.
type Failure struct {
	Task    string    `json:"task"`
	Peer    string    `json:"peer"`
	End     time.Time `json:"end"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
}

// stateCounts counts the tasks the database holds by state, and in all.
func (db *DB) stateCounts(ctx context.Context) (by map[string]int, all int, err error) {
	by = map[string]int{}
	err = db.each(ctx, "SELECT state, count(*) FROM tasks GROUP BY state", func(rows *sql.Rows) error {
		var st string
		var c int
		if err := rows.Scan(&st, &c); err != nil {
			return err
		}
		by[st] += c
		all += c
		return nil
	})
	return by, all, err
}

// Status reads the job's state at now: counts, the rate of successful
// attempts over the last window, and the last failures (at most n).
func (db *DB) Status(ctx context.Context, now time.Time, window time.Duration, n int) (*Status, error) {
	job, err := db.LoadJob(ctx)
	if err != nil {
		return nil, err
	}
	if v, err := db.Version(ctx); err != nil || v == 0 {
		return &Status{Window: window}, err // made, but killed before its first commit
	}
	s := &Status{JobID: job.JobID, Name: job.Name, State: job.State, Error: job.Error, Started: job.Started,
		Finished: job.Finished, Total: job.Summary.Total, Window: window}
	by, counted, err := db.stateCounts(ctx)
	if err != nil {
		return nil, err
	}
	s.Done, s.Failed, s.Running = by[report.TaskDone], by[report.TaskFailed], by[report.TaskRunning]
	s.Queued = counted - s.Done - s.Failed - s.Running
	if s.Total < counted {
		s.Total = counted
	}
	s.Queued += s.Total - counted // tasks not journaled yet
	if !s.Finished.IsZero() {
		now = s.Finished
	}
	since := now.Add(-window)
	var ok int
	if err := db.sql.QueryRowContext(ctx, "SELECT count(*) FROM attempts WHERE outcome = 'ok' AND end >= ?", fmtTime(since)).Scan(&ok); err != nil {
		return nil, db.wrap("read rate", err)
	}
	if span := min(window, now.Sub(s.Started)); span > 0 && !s.Started.IsZero() {
		s.Rate = float64(ok) / span.Seconds()
	}
	if left := s.Total - s.Done - s.Failed; left > 0 && s.Rate > 0 && s.Finished.IsZero() {
		s.ETA = time.Duration(float64(left) / s.Rate * float64(time.Second))
	}
	err = db.each(ctx, `SELECT t.id, a.peer, a.end, a.outcome, a.error FROM attempts a JOIN tasks t ON t.idx = a.task
		WHERE a.outcome NOT IN ('ok', 'canceled') ORDER BY a.end DESC LIMIT ?`, func(rows *sql.Rows) error {
		var f Failure
		var end string
		if err := rows.Scan(&f.Task, &f.Peer, &end, &f.Outcome, &f.Error); err != nil {
			return err
		}
		f.End = parseTime(end)
		s.Failures = append(s.Failures, f)
		return nil
	}, n)
	if err != nil {
		return nil, err
	}
	return s, nil
}
