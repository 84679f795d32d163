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
	// cands: the leases the last scan found old enough to back up,
	// oldest first; until at a worker takes the first that still
	// qualifies (candidateLocked) instead of scanning every running
	// lease again.
	cands []*Lease
	// own: every candidate left is this worker's own (it may not back
	// up its own task): it asks again without a look until the next scan.
	own   string
	scans int // scans of every running lease (a test counts them)
}

// rescanEvery: the backup scan runs at most once per this fraction of
// the threshold (at least a second), and, while candidates are left, at
// least as often: a lease that became old enough since the last scan
// waits at most that long.
const rescanEvery = 16

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
	// Idle workers ask at every result near the end: until backup.at
	// they take from the last scan's candidates, and the scan over
	// every running lease waits.
	if threshold == q.backup.threshold && now.Before(q.backup.at) {
		return q.candidateLocked(peer, now, threshold)
	}
	// next is the earliest time a lease skipped now may be taken. Time
	// alone changes the answer: a new lease is younger, a worker heard
	// again only waits longer; the one event that does (a task's copies
	// drop to one) clears backup.at (dropCopyLocked).
	q.backup.scans++
	clear(q.backup.cands)
	q.backup.cands, q.backup.own = q.backup.cands[:0], ""
	next := now.Add(threshold)
	for _, l := range q.running {
		if q.tasks[l.Task].running != 1 || l.announced {
			continue
		}
		if at := q.backupAtLocked(l, threshold); now.Before(at) {
			if at.Before(next) {
				next = at
			}
			continue
		}
		q.backup.cands = append(q.backup.cands, l)
	}
	slices.SortFunc(q.backup.cands, func(a, b *Lease) int { return a.leased.Compare(b.leased) })
	// Leases that become old enough meanwhile wait for the next scan: a
	// fraction of the threshold away at most while candidates are left,
	// and at least (leases leased one after another cross the threshold
	// one after another: a scan per lease is a scan per ask).
	every := threshold / rescanEvery
	if len(q.backup.cands) > 0 {
		if soon := now.Add(every); soon.Before(next) {
			next = soon
		}
	}
	if soon := now.Add(every); next.Before(soon) {
		next = soon
	}
	q.backup.at, q.backup.threshold = next, threshold
	return q.candidateLocked(peer, now, threshold)
}

// backupAtLocked is when l may be backed up: threshold after its lease,
// and, batched, threshold after its worker was last heard (its worker is
// busy with its queue until it has been silent for as long).
func (q *Queue) backupAtLocked(l *Lease, threshold time.Duration) time.Time {
	at := l.leased.Add(threshold)
	if l.batched {
		if h := q.peers.heard[l.Peer].Add(threshold); h.After(at) {
			at = h
		}
	}
	return at
}

// candidateLocked takes the oldest of the scan's candidates that still
// qualifies (running, its task's only copy, not announced, not heard
// from since) and is not peer's own: another worker may back it up.
// Those before it that no longer qualify are dropped.
func (q *Queue) candidateLocked(peer string, now time.Time, threshold time.Duration) (int, bool) {
	if q.backup.own == peer {
		return 0, false
	}
	cands := q.backup.cands
	keep := cands[:0]
	task, found := 0, false
	i := 0
	for ; i < len(cands) && !found; i++ {
		l := cands[i]
		if q.running[l.ID] != l || q.tasks[l.Task].running != 1 || l.announced || now.Before(q.backupAtLocked(l, threshold)) {
			continue
		}
		if l.Peer == peer {
			keep = append(keep, l)
			continue
		}
		task, found = l.Task, true // it gets a second copy: no candidate now
	}
	keep = append(keep, cands[i:]...)
	clear(cands[len(keep):])
	q.backup.cands = keep
	if !found && len(keep) > 0 {
		q.backup.own = peer
	}
	return task, found
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
