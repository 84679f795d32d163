package sched

import (
	"slices"
	"time"
)

// backupState is what backup copies of stragglers are decided from
// (backupCandidateLocked).
type backupState struct {
	durations []time.Duration // of successful attempts
	median    time.Duration   // of durations[:medianOf]
	medianOf  int
	// at: no running lease can be taken for a backup copy under
	// threshold before this time.
	at        time.Time
	threshold time.Duration
	// own: the scan found leases to take, all of this worker, which may
	// not take its own: until at only it skips the scan.
	own string
}

// backupCandidateLocked picks the running task that has run longest, if
// it has only one copy, is not held by peer, and has run for more than
// twice the median successful attempt (and at least a second). A batched
// lease waits behind the others of its batch and its worker's queue: it
// is taken for a straggler only if its worker has reported nothing for
// as long (stuck, not busy), or every queued batch of a busy worker would
// be run twice near the end of a job.
func (q *Queue) backupCandidateLocked(peer string) (int, bool) {
	if len(q.backup.durations) == 0 || len(q.running) == 0 {
		return 0, false
	}
	// The median is recomputed when the sample grew by an eighth since it
	// was last taken: idle workers ask often near the end of a job.
	if n := len(q.backup.durations); q.backup.medianOf == 0 || n >= q.backup.medianOf+max(1, q.backup.medianOf/8) {
		d := slices.Clone(q.backup.durations)
		slices.Sort(d)
		q.backup.median, q.backup.medianOf = d[n/2], n
	}
	threshold := max(2*q.backup.median, time.Second)
	now := q.now()
	// Idle workers ask at every result near the end: before backupAt no
	// lease can be taken (see below), so the scan over every running
	// lease waits for it; by backupOwn only, when the only leases that
	// could be taken are its own.
	if threshold == q.backup.threshold && now.Before(q.backup.at) && (q.backup.own == "" || q.backup.own == peer) {
		return 0, false
	}
	// next is the earliest time a lease skipped now may be taken. Time
	// alone changes the answer: a new lease is younger, a worker heard
	// again only waits longer; the one event that does (a task's copies
	// drop to one) clears backupAt (dropCopyLocked).
	var best *Lease
	own := false // peer holds a lease that could be taken
	next := now.Add(threshold)
	for _, l := range q.running {
		if q.tasks[l.Task].running != 1 || l.announced {
			continue
		}
		at := l.leased.Add(threshold)
		if l.batched {
			// Its worker is busy with its queue until it has been
			// silent for as long.
			if h := q.peers.heard[l.Peer].Add(threshold); h.After(at) {
				at = h
			}
		}
		if now.Before(at) {
			if at.Before(next) {
				next = at
			}
			continue
		}
		if l.Peer == peer {
			own = true // another worker may take it
			continue
		}
		if best == nil || l.leased.Before(best.leased) {
			best = l
		}
	}
	q.backup.own = ""
	switch {
	case best != nil:
		next = now // the others taken by then stay candidates
	case own:
		q.backup.own = peer // any other worker asks again at once
	}
	q.backup.at, q.backup.threshold = next, threshold
	if best == nil {
		return 0, false
	}
	return best.Task, true
}

// dropCopyLocked counts one running copy of task less. A task left with
// one copy may be backed up now: backupCandidateLocked looks again.
func (q *Queue) dropCopyLocked(task int) {
	ts := &q.tasks[task]
	ts.running--
	if ts.running == 1 {
		q.backup.at = time.Time{}
	}
}
