package sched

import (
	"sync"
	"time"
)

// Adopt takes a result that peer finished for task taskID in an earlier
// session of the job (a hand-over, after the submitter came back): it
// returns a lease of the task to peer, started at start, to be settled
// with Finish like any other, so that the result counts as one attempt
// (one replica, one vote) of that peer under the same rules as a live
// one. It returns nil, and the result is to be dropped, when the task is
// unknown, not part of this run (decided before), decided, already run
// or voted on by peer, when peer is excluded, or when the job needs no
// more replicas of it (verified jobs); in a job without verification a
// task running elsewhere takes the result as a backup copy (the first
// valid result wins, the other copy is revoked).
func (q *Queue) Adopt(peer, taskID string, start time.Time) *Lease {
	q.mu.Lock()
	l := q.adoptLocked(peer, taskID, start)
	q.unlock(-1)
	return l
}

// AdoptRunning is Adopt for a task that peer still runs for an earlier
// session of the job and will hand over when it ends: the lease, settled
// by that hand-over (whatever its outcome), holds the task for peer. No
// backup copy of it is leased: the attempt is announced, not lost, and
// ends within its timeout, or with the peer's session (Lose).
func (q *Queue) AdoptRunning(peer, taskID string, start time.Time) *Lease {
	q.mu.Lock()
	l := q.adoptLocked(peer, taskID, start)
	if l != nil {
		l.announced = true
	}
	q.unlock(-1)
	return l
}

func (q *Queue) adoptLocked(peer, taskID string, start time.Time) *Lease {
	if q.drainedLocked() || q.trustOf(peer).excluded {
		return nil
	}
	t, ok := q.taskIndexLocked(taskID)
	if !ok {
		return nil
	}
	ts := &q.tasks[t]
	if ts.quorum == 0 || ts.settled || ts.placing || ts.check || ts.held || q.involvedLocked(peer, t) {
		return nil // not in this run, decided, held back, or peer's vote is in
	}
	digestOnly := false
	switch {
	case ts.need > 0:
		digestOnly = ts.started > 0 && q.Verifying()
		ts.need--
		if ts.need == 0 {
			q.unqueueLocked(t)
		}
	case q.Verifying():
		return nil // every replica it needs is running
	}
	l := q.leaseLocked(t, peer, digestOnly)
	l.HandedOver = true
	if !start.IsZero() && start.Before(l.Start) {
		l.Start = start.UTC()
	}
	return l
}

// taskIndexLocked finds a task by ID (the index is built on first use).
func (q *Queue) taskIndexLocked(id string) (int, bool) {
	if q.byID == nil {
		q.repMu.Lock()
		q.byID = make(map[string]int, q.recs.Len())
		for i := range q.recs.Len() {
			q.byID[q.recs.ID(i)] = i
		}
		q.repMu.Unlock()
	}
	t, ok := q.byID[id]
	return t, ok
}

// Hold holds every lease back (Next waits, TryNext gives none) until the
// returned release is called (the first call counts, later ones do
// nothing): while a peer that may hand results over enrols in a resumed
// run, the tasks it finished are not leased to others first. The caller
// bounds the hold.
func (q *Queue) Hold() (release func()) {
	q.mu.Lock()
	q.holds++
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			q.holds--
			q.signal()
			q.mu.Unlock()
		})
	}
}
