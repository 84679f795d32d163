package sched

import "slices"

// The pending list (Queue.pending) holds the tasks with replicas still to
// start, in the order they are to start. Each of its operations is O(1)
// in the usual case, so that a job of a million tasks costs the same per
// task as one of ten thousand: a lease takes the list's first task (the
// slice moves on), and a flag per task (taskState.queued) says whether
// the task is in the list, so that settling a task that is not (the
// usual case: its last replica was leased) scans nothing.

// enqueueLocked puts task in the pending list, at its front or end,
// unless it is there already.
func (q *Queue) enqueueLocked(task int, front bool) {
	ts := &q.tasks[task]
	if ts.queued {
		return
	}
	ts.queued = true
	if front {
		q.pending = slices.Insert(q.pending, 0, task) // rare: a lost or taken-back attempt
	} else {
		q.pending = append(q.pending, task)
	}
}

// unqueueAtLocked takes the task at position i out of the pending list.
func (q *Queue) unqueueAtLocked(i int) {
	q.tasks[q.pending[i]].queued = false
	if i == 0 {
		q.pending = q.pending[1:]
		return
	}
	q.pending = slices.Delete(q.pending, i, i+1)
}

// unqueueLocked takes task out of the pending list, if it is there.
func (q *Queue) unqueueLocked(task int) {
	if !q.tasks[task].queued {
		return
	}
	if i := slices.Index(q.pending, task); i >= 0 {
		q.unqueueAtLocked(i)
	}
}
