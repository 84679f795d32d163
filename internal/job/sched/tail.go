package sched

// The tail. A worker asks for more leases than it has slots (a prefetch
// of half as many again, at least one), so that a slot finds its next
// task at hand when it ends one. Near the end of a job the prefetch
// strands work: the last tasks wait behind a slow worker's running one
// while faster workers run out of work and idle, and the job ends with
// the slow worker's prefetched task. So once the tasks not yet leased are
// no more than the slots of all workers, a worker is leased a task only
// for a slot of its own that is free: the last tasks go to whichever
// slots free up first, the fast workers' as often as not. A worker loses
// the prefetch's round trip on its last few tasks, nothing a task that
// runs a batch's work (BatchWork) or more would notice; tasks shorter
// than that are batched, and their tail is shorter than a round trip, so
// they keep their prefetch.

// tailHoldLocked reports whether peer may not take another lease now: the
// job is in its tail and peer's slots are all taken.
func (q *Queue) tailHoldLocked(peer string) bool {
	slots := q.peers.slots[peer]
	if slots <= 0 || q.peers.held[peer] < slots || len(q.pending) == 0 || len(q.pending) > q.peers.slotSum {
		return false
	}
	mean := q.typicalRunLocked()
	return mean == 0 || mean >= BatchWork
}

// slotFreedLocked returns a channel closed when one of peer's leases
// ends (unrunLocked), its slots change or the queue closes: what a worker
// held in the tail waits for, instead of every change of the queue (a
// thousand workers woken at each of the last thousand results).
func (q *Queue) slotFreedLocked(peer string) <-chan struct{} {
	ch := q.peers.freed[peer]
	if ch == nil {
		ch = make(chan struct{})
		q.peers.freed[peer] = ch
	}
	return ch
}

// slotFreeLocked wakes the worker peer if it waits in the tail.
func (q *Queue) slotFreeLocked(peer string) {
	if ch := q.peers.freed[peer]; ch != nil {
		close(ch)
		delete(q.peers.freed, peer)
	}
}
