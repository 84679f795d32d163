package job

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
)

// records keeps the tasks' records (report.Task) of a run, in memory only
// while they are at work: a job of a million tasks holds a few bytes per
// task, not its record. A task's record is
//
//   - fresh: never made (a task not tried yet): made from the spec when
//     first asked for;
//   - hot: in memory (leased, retried, changed and not journaled yet);
//   - cold: the task was decided (done or failed) and its record handed
//     to the job database: it is read back from there when asked for
//     again (rare: a vote reopened, an attempt canceled late, a watcher).
//
// report.json is written at the end from the text of the records as they
// left memory (spool.go), or from the job database (EachTask) as `p2pc
// report` writes it: the same bytes. All methods are called with the runner's lock
// (r.mu) held.
type records struct {
	r    *runner
	kind []uint8 // by task
	hot  map[int]*report.Task
	// spool has report.json's text of the decided records that left
	// memory (spool.go).
	spool *spool
}

const (
	recFresh uint8 = iota
	recHot
	recCold
)

func newRecords(r *runner, n int) *records {
	return &records{r: r, kind: make([]uint8, n), hot: map[int]*report.Task{}, spool: newSpool(r.p.OutDir, n)}
}

// Len is the number of tasks.
func (rs *records) Len() int { return len(rs.kind) }

// ID is task i's ID, from the spec.
func (rs *records) ID(i int) string { return rs.r.p.Spec.Tasks.ID(i) }

// Task is task i's record, made or read back if it is not in memory.
func (rs *records) Task(i int) *report.Task {
	switch rs.kind[i] {
	case recHot:
		return rs.hot[i]
	case recCold:
		t, err := rs.load(i)
		if err == nil {
			t.Reused = false // asked for to be changed: this run's now
			rs.set(i, t)
			return t
		}
		// The database failed (a full disk): the run stops, and what it
		// holds stays for the rerun.
		rs.r.log.Error("read a task's record back from the job database", "task", rs.ID(i), "err", err)
		if rs.r.stopRun != nil {
			rs.r.stopRun(err)
		}
	}
	t := rs.fresh(i)
	rs.set(i, t)
	return t
}

// fresh is task i's record before its first attempt.
func (rs *records) fresh(i int) *report.Task {
	job := rs.r.p.Spec
	id, params := job.Tasks.ID(i), job.TaskParamsJSON(i)
	return &report.Task{ID: id, Params: params, State: report.TaskPending, Attempts: []report.Attempt{}, Key: rs.r.p.taskKey(i, id, params)}
}

// set makes t task i's record in memory.
func (rs *records) set(i int, t *report.Task) {
	rs.kind[i] = recHot
	rs.hot[i] = t
}

// setCold notes that task i's record is in the job database only (a task
// an earlier run finished, reused as it is).
func (rs *records) setCold(i int) {
	delete(rs.hot, i)
	rs.kind[i] = recCold
}

// reused: at the start of a run, task i is done (an earlier run's,
// reused): cold, or in memory as done (from a report.json).
func (rs *records) reused(i int) bool {
	return rs.kind[i] == recCold || rs.kind[i] == recHot && rs.hot[i].State == report.TaskDone
}

// journaled: task i's record was handed to the job database. A decided
// task's record leaves memory.
func (rs *records) journaled(i int) {
	if t := rs.hot[i]; t != nil && (t.State == report.TaskDone || t.State == report.TaskFailed) {
		rs.spool.put(i, t)
		rs.setCold(i)
	}
}

// load reads task i's record back from the job database, once every
// change handed to it is committed.
func (rs *records) load(i int) (*report.Task, error) {
	ctx := context.Background()
	if err := rs.r.db.Flush(ctx); err != nil {
		return nil, err
	}
	t, found, err := rs.r.db.LoadTask(ctx, i)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("task %s: no row in %s", rs.ID(i), rs.r.db.Path())
	}
	return t, nil
}

// each calls fn with every task's record in task order: those in memory
// as they are, the others as the job database holds them (read through
// db, a read-only handle: it is read while the run writes) or, never
// tried, as the spec gives them. Cold records are read after a Flush.
func (rs *records) each(ctx context.Context, db *jobdb.DB, fn func(i int, t *report.Task) error) error {
	if err := rs.flush(ctx); err != nil {
		return err
	}
	return eachRecord(ctx, db, rs.kind, rs.hot, rs.fresh, fn)
}

// flush commits every change handed to the job database (a closed one
// has committed them all).
func (rs *records) flush(ctx context.Context) error {
	if err := rs.r.db.Flush(ctx); err != nil && !errors.Is(err, jobdb.ErrClosed) {
		return err
	}
	return nil
}

// snapshot copies what eachRecord needs to read the records without the
// runner's lock: the kinds, and the records in memory (deep copies).
func (rs *records) snapshot() (kind []uint8, hot map[int]*report.Task) {
	hot = make(map[int]*report.Task, len(rs.hot))
	for i, t := range rs.hot {
		c := *t
		c.Attempts = slices.Clone(t.Attempts)
		c.Files = slices.Clone(t.Files)
		c.Votes = slices.Clone(t.Votes)
		c.Partials = slices.Clone(t.Partials)
		hot[i] = &c
	}
	return slices.Clone(rs.kind), hot
}

// eachRecord calls fn with every task's record in task order, by kind:
// hot from hot, fresh made by fresh, cold from db.
func eachRecord(ctx context.Context, db *jobdb.DB, kind []uint8, hot map[int]*report.Task, fresh func(int) *report.Task, fn func(i int, t *report.Task) error) error {
	next := 0
	emit := func(upto int) error { // the tasks before upto that are not cold
		for ; next < upto; next++ {
			switch kind[next] {
			case recHot:
				if err := fn(next, hot[next]); err != nil {
					return err
				}
			case recFresh:
				if err := fn(next, fresh(next)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := db.EachTask(ctx, func(i int, t *report.Task) error {
		if i >= len(kind) {
			return nil
		}
		if err := emit(i); err != nil {
			return err
		}
		if kind[i] == recCold {
			next = i + 1
			return fn(i, t)
		}
		return emit(i + 1)
	})
	if err != nil {
		return err
	}
	return emit(len(kind))
}
