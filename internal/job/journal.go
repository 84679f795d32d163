package job

import (
	"context"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// The journal: the queue's changes to the tasks' records reach the job
// database through one goroutine (startJournal) that writes what was
// touched, paced, and holds back the rows of running tasks for a while.

// Task marks (runner.marks).
const (
	markTouched uint8 = 1 << iota // in touched: to be journaled
	markHeld                      // in held: its change waits a pass
)

// touchLocked marks task i for the journal (r.mu held).
func (r *runner) touchLocked(i int) {
	if r.marks[i]&markTouched == 0 {
		r.marks[i] |= markTouched
		r.touched = append(r.touched, i)
	}
	r.wake()
}

// touchedLocked marks task i for the journal after the queue changed its
// record (r.mu held): a record the journal took out of memory since was
// written with the change.
func (r *runner) touchedLocked(i int) {
	if r.recs.kind[i] == recCold {
		return
	}
	r.touchLocked(i)
}

// wake tells the journal that something changed.
func (r *runner) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// journalLocked hands every change to the job database (r.mu held); its
// writer commits it within a few milliseconds.
func (r *runner) journalLocked() error { return r.journalPassLocked(false) }

// queueJob hands the job's own fields to the job database now if they
// changed since the journal's last pass (r.dirty), rather than at its
// next pass: a Flush after it covers them.
func (r *runner) queueJob() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.dirty {
		return nil
	}
	if err := r.db.PutJob(r.rep); err != nil {
		return err
	}
	r.dirty = false
	return nil
}

// heldTask is a running task whose row the journal holds back, since at.
type heldTask struct {
	task int
	at   time.Time
}

// holdRunning is how long the journal holds back the row of a task that
// is running (journalPassLocked).
const holdRunning = time.Second

// journalPassLocked hands what changed to the job database (r.mu held).
// With hold, the change of a task that is running (a new lease, mostly)
// waits up to holdRunning before its row is written: a fine-grained task
// is done by then, and its row is written once, done, rather than
// running and then done. Nothing of a result waits: the database shows a
// running task late, and a rerun after a crash runs a task that was
// running again whatever its row says.
func (r *runner) journalPassLocked(hold bool) error {
	pass := r.durable.passes.Add(1)
	if r.dirty {
		if err := r.db.PutJob(r.rep); err != nil {
			return err
		}
		r.dirty = false
	}
	// What was held back for holdRunning is written now (unless it was
	// since: then it is no longer marked held).
	now := time.Now()
	held := r.held[:0]
	for _, h := range r.held {
		switch m := r.marks[h.task]; {
		case m&markHeld == 0, m&markTouched != 0:
			// Written since, or to be written below (held: not again).
		case !hold || now.Sub(h.at) >= holdRunning:
			r.marks[h.task] |= markTouched
			r.touched = append(r.touched, h.task)
		default:
			held = append(held, h)
		}
	}
	r.held = held
	for _, i := range r.touched {
		if r.recs.kind[i] == recFresh {
			// Never tried: journaled as pending, kept out of memory.
			r.marks[i] = 0
			if err := r.db.PutTask(i, r.recs.fresh(i)); err != nil {
				return err
			}
			continue
		}
		t := r.recs.Task(i)
		if hold && r.marks[i]&markHeld == 0 && t.State == report.TaskRunning {
			r.marks[i] = markHeld
			r.held = append(r.held, heldTask{i, now})
			continue
		}
		r.marks[i] = 0
		if err := r.db.PutTask(i, t); err != nil {
			return err
		}
		r.recs.journaled(i)
	}
	r.touched = r.touched[:0]
	if cap(r.touched) > 1<<16 {
		r.touched = nil // the start's list of every task: not kept for the run
	}
	if len(r.held) > 0 {
		r.wake() // the next pass writes them
	}
	// Once the writer committed what this pass handed it (and all before).
	return r.db.OnCommit(func(err error) {
		if err == nil {
			r.durable.reached(pass)
		}
	})
}

// startJournal journals changes as they come. When the database fails
// (a full disk) it ends the run through fail.
func (r *runner) startJournal(fail context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-r.kick:
				r.mu.Lock()
				err := r.journalPassLocked(true)
				r.mu.Unlock()
				if err == nil {
					err = r.db.Err()
				}
				if err != nil {
					fail(err)
					return
				}
				// Pace the journal: changes meanwhile gather in touched,
				// so that a task's lease, run and result are mostly one
				// write (a kill loses at most this much, which reruns).
				select {
				case <-done:
					return
				case <-time.After(journalPace):
				}
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.journalFresh(fail)
	}()
	return func() { close(done); wg.Wait() }
}

// freshChunk is how many tasks journalFresh journals per hold of r.mu.
const freshChunk = 256

// journalFresh journals every task not tried yet as pending, a chunk at
// a time, beside the run rather than before it (a million rows take
// seconds): the database then lists every task of the job, `p2pc report`
// and `p2pc status` too. A task that is at work by the time its chunk
// comes is journaled by the journal instead, and an earlier run's task
// reused as done (cold) is journaled as it is. It finishes its work even
// when the journal is stopped (the run's end waits for it), unless the
// database fails.
func (r *runner) journalFresh(fail context.CancelCauseFunc) {
	for from := 0; from < r.recs.Len(); from += freshChunk {
		r.mu.Lock()
		for i := from; i < min(from+freshChunk, r.recs.Len()); i++ {
			if r.recs.kind[i] != recFresh {
				continue
			}
			if _, ok := r.deferred[i]; ok {
				continue // an earlier run's done row, checked at release
			}
			if err := r.db.PutTask(i, r.recs.fresh(i)); err != nil {
				r.mu.Unlock()
				fail(err)
				return
			}
		}
		r.mu.Unlock()
	}
}

// journalPace is the least time between two journal writes.
const journalPace = 50 * time.Millisecond
