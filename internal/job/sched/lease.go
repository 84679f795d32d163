package sched

import (
	"context"
	"time"

	"github.com/p2pc/p2pc/internal/job/vc"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// Next blocks until a task can be leased to peer and returns the lease,
// or ErrDrained when the job has nothing left, ErrExcluded when the peer
// may not work for the job any more, or ctx's error.
func (q *Queue) Next(ctx context.Context, peer string) (*Lease, error) {
	return q.next(ctx, peer, false)
}

func (q *Queue) next(ctx context.Context, peer string, checkOnly bool) (*Lease, error) {
	select {
	case <-q.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		q.mu.Lock()
		if q.drainedLocked() {
			q.unlock(-1)
			return nil, ErrDrained
		}
		if q.trustOf(peer).excluded {
			// Told so, the worker stops asking (a remote peer's session
			// ends for good): it is no voter for the tasks left, even if a
			// spot check reinstates it, so the submitter decides them.
			delete(q.peers.workers, peer)
			q.unlock(-1)
			return nil, ErrExcluded
		}
		var l *Lease
		if peer == q.self && q.self != "" && q.holds == 0 {
			l = q.takeCheckLocked(checkOnly)
		}
		if !checkOnly {
			q.peers.workers[peer] = q.now()
			if l == nil && q.holds == 0 {
				l = q.takeLocked(peer)
			}
		}
		if l != nil {
			q.unlock(-1)
			return l, nil
		}
		var wake <-chan struct{} = q.wake
		if q.tailHoldLocked(peer) {
			// Only the end of one of its leases gives it a lease now: it
			// is not woken by every other worker's result.
			wake = q.slotFreedLocked(peer)
		} else {
			q.waited = true
		}
		wait := 250 * time.Millisecond // re-check backup candidates
		if held, left := q.probe.hold(peer, q.now()); held {
			wait = min(wait, left) // the probe window's end
		}
		q.unlock(-1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// TryNext returns a lease for peer if one can be had right now, without
// waiting (a peer's prefetch); nil otherwise.
func (q *Queue) TryNext(peer string) *Lease {
	select {
	case <-q.open:
	default:
		return nil
	}
	q.mu.Lock()
	var l *Lease
	if !q.drainedLocked() && !q.trustOf(peer).excluded && q.holds == 0 {
		l = q.takeLocked(peer)
	}
	q.unlock(-1)
	return l
}

// takeLocked leases peer its next task, if it may have one now (the
// probe phase holds a worker to ProbeLeases, the tail to its slots).
func (q *Queue) takeLocked(peer string) *Lease {
	now := q.now()
	if held, _ := q.probe.hold(peer, now); held || q.tailHoldLocked(peer) {
		return nil
	}
	l := q.takeTaskLocked(peer)
	if l != nil {
		q.probe.leased(peer, now)
	}
	return l
}

// takeTaskLocked picks the task peer runs next: a pending one (unless
// peer holds its fair share, fair.go), else a backup copy near the end.
func (q *Queue) takeTaskLocked(peer string) *Lease {
	if len(q.pending) > 0 && q.overShareLocked(peer) {
		return nil // fair.go
	}
	for i, t := range q.pending {
		if q.involvedLocked(peer, t) {
			continue
		}
		ts := &q.tasks[t]
		first := ts.started == 0
		ts.need--
		if ts.need <= 0 {
			q.unqueueAtLocked(i)
		}
		if first && q.verify.Trust == spec.TrustAdaptive && q.verify.Replicas > 1 {
			// Adaptive replication (BOINC): a trusted peer's result is
			// replicated only with probability 1/streak.
			if tr := q.trustOf(peer); tr.streak >= TrustedStreak && q.rnd.Float64() >= 1/float64(tr.streak) {
				ts.quorum = 1
				if ts.need > 0 {
					ts.need = 0
					q.unqueueLocked(t)
				}
			}
		}
		return q.leaseLocked(t, peer, !first && q.Verifying())
	}
	if len(q.pending) > 0 {
		return nil
	}
	// Nothing pending: near the end of the job an idle worker may run a
	// backup copy of the slowest running task (first valid result wins).
	if !q.Verifying() {
		if t, ok := q.backupCandidateLocked(peer); ok {
			l := q.leaseLocked(t, peer, false)
			q.log.Debug("backup copy of a straggler", "task", l.TaskID, "peer", peer, "attempt", l.Attempt)
			return l
		}
	}
	return nil
}

// involvedLocked: peer (or, verifying with distinct hosts, a peer of its
// host) runs a replica of task, or already voted on it. Replicas of a
// task go to distinct peers, and distinct hosts.
func (q *Queue) involvedLocked(peer string, task int) bool {
	host := ""
	if q.Verifying() {
		host = q.peers.enrolled[peer]
	}
	same := func(p string) bool { return p == peer || (host != "" && q.peers.enrolled[p] == host) }
	if q.tasks[task].running > 0 { // else no need to scan every lease
		for _, l := range q.running {
			if l.Task == task && same(l.Peer) {
				return true
			}
		}
	}
	if q.Verifying() {
		for _, v := range q.votesOf(task) {
			if same(v.peer) {
				return true
			}
		}
	}
	return false
}

func (q *Queue) leaseLocked(task int, peer string, digestOnly bool) *Lease {
	q.nextID++
	ts := &q.tasks[task]
	q.repMu.Lock()
	rt := q.rec(task)
	attempt := len(rt.Attempts) + int(ts.running)
	rt.State = report.TaskRunning
	id, params := rt.ID, rt.Params
	q.repMu.Unlock()
	l := &Lease{
		ID:         q.nextID,
		Task:       task,
		TaskID:     id,
		Attempt:    attempt,
		Peer:       peer,
		Params:     params,
		Start:      q.now().UTC(),
		DigestOnly: digestOnly,
		revoked:    make(chan struct{}),
	}
	l.leased = l.Start
	l.VC = vc.NewCursor(id, l.revoked)
	q.running[l.ID] = l
	q.peers.held[peer]++
	q.emit(leaseRef{l})
	q.moved = q.now()
	ts.running++
	ts.started++
	return l
}
