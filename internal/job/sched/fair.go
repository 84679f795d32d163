package sched

// Fair shares. A worker holds at most its slots' share of the work not
// yet done: ceil((pending + running) * its slots / all workers' slots)
// running leases. Without the bound, which worker's leaser ran first
// after the probe phase decided where a small job ran: batches of tiny
// tasks are sized up to MinBatchWork, so one worker's credits (its slots
// and its prefetch) could take most of the job in one go, and how many
// depended on the run time measured first (a loaded machine measures a
// longer one: smaller batches, every worker). With it every worker gets
// about its share in large batches, whatever ran on the machine before.
// The bound never starves a worker (the share is at least one lease while
// any task is pending) and only binds near the end of a job or in a small
// one: while much is left, a worker's slots and prefetch are far below
// its share. Backup copies (nothing pending) are not bounded by it.

// overShareLocked reports whether peer holds its share of the work left
// already (a worker without slots on record is not bounded).
func (q *Queue) overShareLocked(peer string) bool {
	mine := q.peers.slots[peer]
	if mine <= 0 {
		return false
	}
	all := 0
	for _, s := range q.peers.slots {
		all += max(s, 0)
	}
	left := len(q.pending) + len(q.running)
	share := (left*mine + all - 1) / all
	return q.peers.held[peer] >= share
}

// unrunLocked takes l off the running leases.
func (q *Queue) unrunLocked(l *Lease) {
	delete(q.running, l.ID)
	if q.peers.held[l.Peer]--; q.peers.held[l.Peer] <= 0 {
		delete(q.peers.held, l.Peer)
	}
	q.slotFreeLocked(l.Peer) // a worker held in the tail may go on
}
