package sched

import (
	"slices"
	"time"
)

// Batching. A worker may take several leases at once and run them in one
// plugin call (a batch); each lease stays one attempt of one task, with
// its own outcome. The queue sizes batches by guided self-scheduling: a
// batch carries about BatchWork of measured work, and at most half a
// slot's share of what is left (the tasks not yet leased over twice the
// slots of all enrolled workers: each slot holds a batch and its worker
// prefetches more), so batches are large while much work
// remains and shrink to single tasks near the end: slow and fast workers
// finish together. Until a task's run time is known, and for tasks of
// BatchUnbatched or more, a batch is one lease.
const (
	// BatchWork is the work a batch carries.
	BatchWork = 5 * time.Millisecond
	// BatchUnbatched: tasks that run this long or longer are never
	// batched.
	BatchUnbatched = time.Second
	// DefaultBatchMax bounds a batch unless the spec does.
	DefaultBatchMax = 256
)

// batchSize is the size of the next batch: mean is the typical run time
// of the job's tasks (0: not measured yet), left the leases not yet handed
// out, slots those of all workers, limit the most a batch may hold.
func batchSize(mean time.Duration, left, slots, limit int) int {
	if limit <= 1 || mean <= 0 || mean >= BatchUnbatched || left <= 1 {
		return 1
	}
	n := int(BatchWork / mean)
	// Half a slot's share of what is left: a worker holds a batch per
	// slot and prefetches about half as many again.
	if share := (left + 2*max(slots, 1) - 1) / (2 * max(slots, 1)); n > share {
		n = share
	}
	return min(max(n, 1), limit)
}

// BatchSize is how many leases worker peer should take at once now
// (TryNext after Next, as many times), and whether the tasks' run time
// is measured yet (until then batches are single leases).
func (q *Queue) BatchSize(peer string) (n int, measured bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	mean := q.typicalRunLocked()
	slots := 0
	for _, s := range q.slots {
		slots += s
	}
	return batchSize(mean, len(q.pending), slots, q.batchMax), q.runN > 0
}

// SetSlots records how many slots worker peer has (batch sizing).
func (q *Queue) SetSlots(peer string, n int) {
	q.mu.Lock()
	q.slots[peer] = n
	q.mu.Unlock()
}

// Measured is closed once a task's run time is known.
func (q *Queue) Measured() <-chan struct{} { return q.measured }

// runSamples is how many recent run times the typical one is the median
// of: a median, so that a process's cold first call or a stray slow task
// does not stop batching.
const runSamples = 31

// typicalRunLocked is the median of the recent run times (0: none yet).
func (q *Queue) typicalRunLocked() time.Duration {
	n := min(q.runN, runSamples)
	if n == 0 {
		return 0
	}
	s := make([]time.Duration, n)
	copy(s, q.runs[:n])
	slices.Sort(s)
	return s[n/2]
}

// noteRunLocked records a successful attempt's run time.
func (q *Queue) noteRunLocked(l *Lease, res Result) {
	start := res.Start
	if start.IsZero() || start.Before(l.Start) {
		start = l.Start
	}
	d := res.End.Sub(start)
	if d < 0 {
		return
	}
	q.runs[q.runN%runSamples] = d
	q.runN++
	if q.runN == 1 {
		close(q.measured)
	}
}
