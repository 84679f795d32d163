package sched

// Held tasks are work the queue counts but does not lease yet: the tasks
// of a stage whose upstream tasks are not accepted yet (package job's
// graph.go). They are given in Config.Held; Release puts them in the
// pending list, in the order released, and Drop settles those that will
// never run (blocked by an upstream failure, or reused from an earlier
// run), counting them neither done nor failed. The queue is drained only
// when no task is pending, running or held, and a queue whose tasks left
// are all held is waiting, not stalled (Stalled).

// Release makes held tasks leasable, at the end of the pending list. A
// task that is not held (released already, dropped, or never held) is
// left as it is.
func (q *Queue) Release(tasks ...int) {
	q.mu.Lock()
	if q.unholdLocked(tasks, func(t int) { q.enqueueLocked(t, false) }) > 0 {
		// The wait for upstream work was no stall: the watchdog's window
		// starts now.
		q.moved = q.now()
		q.signal()
	}
	q.unlock(-1)
}

// Drop settles held tasks that will not run: they leave the work left
// without being done or failed (their records are the caller's). A task
// that is not held is left as it is.
func (q *Queue) Drop(tasks ...int) {
	q.mu.Lock()
	if q.unholdLocked(tasks, q.settleLocked) > 0 {
		q.signal()
	}
	q.unlock(-1)
}

// unholdLocked calls fn with each of tasks that is held, held no more,
// and says how many it was.
func (q *Queue) unholdLocked(tasks []int, fn func(task int)) int {
	n := 0
	for _, t := range tasks {
		if ts := &q.tasks[t]; ts.held {
			ts.held = false
			q.held--
			fn(t)
			n++
		}
	}
	return n
}

// Held counts the tasks held back.
func (q *Queue) Held() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held
}

// holdLocked adds the tasks of Config.Held to the work left (New).
func (q *Queue) holdLocked(tasks []int, need, quorum int32) {
	for _, t := range tasks {
		ts := &q.tasks[t]
		if ts.held || ts.queued {
			continue
		}
		*ts = taskState{need: need, quorum: quorum, held: true}
		q.held++
		q.remaining++
	}
}
