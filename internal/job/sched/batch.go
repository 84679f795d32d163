package sched

import (
	"slices"
	"time"
)

// Batching. A worker may take several leases at once and run them in one
// plugin call (a batch); each lease stays one attempt of one task, with
// its own outcome. The queue sizes batches by guided self-scheduling over
// measured run times: a batch carries about BatchWork of work, and at
// most half a slot's share of what is left (the tasks not yet leased over
// twice the slots of all enrolled workers: each slot holds a batch and
// its worker prefetches more), so batches are large while much work
// remains and shrink near the end: slow and fast workers finish together.
// The shrinking stops at MinBatchWork: a batch's tail costs at most its
// own work, so a floor of a millisecond costs at most about a millisecond
// at the end of a job, while tasks of microseconds no longer pay a whole
// lease's path (coordinator, peer, plugin call) each. Until a task's run
// time is known (see probe.go), and for tasks of BatchUnbatched or more,
// a batch is one lease.
const (
	// BatchWork is the work a batch carries while much is left.
	BatchWork = 5 * time.Millisecond
	// MinBatchWork is the least work a batch of measured tasks carries
	// (unless fewer tasks are left or the spec bounds batches lower).
	MinBatchWork = time.Millisecond
	// BatchUnbatched: tasks that run this long or longer are never
	// batched.
	BatchUnbatched = time.Second
	// DefaultBatchMax bounds a batch unless the spec does.
	DefaultBatchMax = 256
	// batchTaskCost is what a task costs its slot within a batch beyond
	// its own run time (the plugin's result send and work folder check),
	// which the measured run time does not hold: without it a task of a
	// microsecond would count as a thousandth of its real share of a
	// batch's time.
	batchTaskCost = 20 * time.Microsecond
)

// batchState is what batches are sized from: the recent run times of
// successful attempts (runN of them in all) and the bound.
type batchState struct {
	max  int
	runs [runSamples]time.Duration
	runN int
}

// batchSize is the size of the next batch: mean is the typical run time
// of the job's tasks (0: not measured yet), left the leases not yet handed
// out, slots those of all workers, limit the most a batch may hold:
// clamp(half a slot's share of left, MinBatchWork/mean, BatchWork/mean),
// at most limit and left.
func batchSize(mean time.Duration, left, slots, limit int) int {
	if limit <= 1 || mean <= 0 || mean >= BatchUnbatched || left <= 1 {
		return 1
	}
	cost := mean + batchTaskCost
	n := int(BatchWork / cost)
	// Half a slot's share of what is left: a worker holds a batch per
	// slot and prefetches about half as many again.
	if share := (left + 2*max(slots, 1) - 1) / (2 * max(slots, 1)); n > share {
		n = share
	}
	n = max(n, int(MinBatchWork/cost), 1)
	return min(n, limit, left)
}

// BatchSize is how many leases worker peer should take at once now
// (TryNext after Next, as many times): 1 until the tasks' run time is
// measured.
func (q *Queue) BatchSize(peer string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	mean := q.typicalRunLocked()
	slots := 0
	for _, s := range q.peers.slots {
		slots += s
	}
	return batchSize(mean, len(q.pending), slots, q.batch.max)
}

// Batched marks leases handed out together as one batch (a worker calls
// it once it took them): a batched lease waits behind the others and its
// worker's queue, so it is backed up only when its worker stopped
// reporting results (backupCandidateLocked).
func (q *Queue) Batched(ls []*Lease) {
	if len(ls) < 2 {
		return
	}
	q.mu.Lock()
	for _, l := range ls {
		l.batched = true
	}
	q.mu.Unlock()
}

// SetSlots records how many slots worker peer has (batch sizing, the
// tail: tail.go).
func (q *Queue) SetSlots(peer string, n int) {
	q.mu.Lock()
	q.peers.slotSum += n - q.peers.slots[peer]
	q.peers.slots[peer] = n
	q.slotFreeLocked(peer)
	q.mu.Unlock()
}

// runSamples is how many recent run times the typical one is the median
// of: a median, so that a process's cold first call or a stray slow task
// does not stop batching.
const runSamples = 31

// typicalRunLocked is the median of the recent run times (0: none yet).
func (q *Queue) typicalRunLocked() time.Duration {
	n := min(q.batch.runN, runSamples)
	if n == 0 {
		return 0
	}
	s := make([]time.Duration, n)
	copy(s, q.batch.runs[:n])
	slices.Sort(s)
	return s[n/2]
}

// noteRunLocked records a successful attempt's run time; the first ends
// the probe phase.
func (q *Queue) noteRunLocked(l *Lease, res Result) {
	start := res.Start
	if start.IsZero() || start.Before(l.Start) {
		start = l.Start
	}
	d := res.End.Sub(start)
	if d < 0 {
		return
	}
	q.batch.runs[q.batch.runN%runSamples] = d
	q.batch.runN++
	q.probe.measured()
}
