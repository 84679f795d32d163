package sched

import (
	"slices"
	"sync"
)

// Decide, then apply. The queue decides under mu and notes each decision
// (emit); unlock lets mu go and hands the batch to the Applier. Batches
// are numbered under mu and applied in that order, one at a time, never
// under mu (lane): a goroutine waits for its turn without any lock of the
// queue, so the Applier may ask the queue for its state. An Accept's
// outcome (the output placed or not) comes back into the queue
// (placedLocked) and what that decides is applied in turn. The callbacks
// of leases revoked meanwhile (Lease.OnRevoke) run after that, under no
// lock of the queue.

// lane orders the batches of decisions: batch n is applied once batches
// 1 to n-1 are.
type lane struct {
	mu   sync.Mutex
	cond sync.Cond
	next uint64 // the batches numbered so far (under Queue.mu)
	done uint64 // the batches applied (under lane.mu)
}

// wait blocks until batch n's turn.
func (l *lane) wait(n uint64) {
	l.mu.Lock()
	for l.done != n-1 {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

// pass ends batch n's turn.
func (l *lane) pass() {
	l.mu.Lock()
	l.done++
	l.cond.Broadcast()
	l.mu.Unlock()
}

// batch is the decisions of one hold of mu, and the callbacks of the
// leases revoked meanwhile. Batches are reused (batches): a job of a
// million tasks makes a few.
type batch struct {
	ds    []Decision
	later []func()
}

var batches = sync.Pool{New: func() any { return new(batch) }}

// emit notes d, to be applied when mu is let go (mu held).
func (q *Queue) emit(d Decision) {
	if q.cur == nil {
		q.cur = batches.Get().(*batch)
	}
	q.cur.ds = append(q.cur.ds, d)
}

// placing is the outcome of applying an Accept.
type placing struct {
	a   Accept
	err error
}

// unlock lets mu go and applies what was decided under it (mu held). It
// reports whether an Accept of task was placed and the task accepted.
func (q *Queue) unlock(task int) (accepted bool) {
	for {
		b := q.cur
		q.cur = nil
		if b == nil {
			q.mu.Unlock()
			return accepted
		}
		for i, d := range b.ds {
			if r, ok := d.(leaseRef); ok {
				b.ds[i] = r.l.out() // as it was handed out, complete
			}
		}
		n := uint64(0)
		if len(b.ds) > 0 {
			q.lane.next++
			n = q.lane.next
		}
		q.mu.Unlock()
		var few [2]placing
		ps := few[:0]
		if n > 0 {
			q.lane.wait(n)
			errs := q.apply.Apply(b.ds)
			for i, d := range b.ds {
				if a, ok := d.(Accept); ok {
					var err error
					if i < len(errs) {
						err = errs[i]
					}
					ps = append(ps, placing{a, err})
				}
			}
			q.lane.pass()
		}
		runAll(b.later)
		clear(b.ds)
		clear(b.later)
		b.ds, b.later = b.ds[:0], b.later[:0]
		batches.Put(b)
		if len(ps) == 0 {
			return accepted
		}
		q.mu.Lock()
		for _, p := range ps {
			if q.placedLocked(p.a, p.err) && p.a.Task == task {
				accepted = true
			}
		}
	}
}

func runAll(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}

// placedLocked settles an applied Accept: with its output placed the
// task is decided (or, spot-checked, decided again); if placing failed
// the task runs another replica, or another trusted run, as if the vote
// had not been decided. It reports whether the task was accepted.
func (q *Queue) placedLocked(a Accept, err error) bool {
	ts := &q.tasks[a.Task]
	ts.placing = false
	defer q.signal()
	if err != nil {
		q.log.Warn("place output", "task", a.TaskID, "err", err)
		if a.Check {
			if a.Output.Stage != "" {
				q.emit(Discard{Stage: a.Output.Stage})
			}
			q.wantCheckLocked(a.Task)
			return false
		}
		// The output stays with its vote: placed again if it wins again.
		kept := false
		if m := q.more[a.Task]; m != nil && !q.closed {
			if i := slices.IndexFunc(m.votes, func(v vote) bool { return v.peer == a.Peer && v.digest == a.Digest && !v.out.held() }); i >= 0 {
				m.votes[i].out, kept = a.Output, true
			}
		}
		if !kept && a.Output.Stage != "" {
			q.emit(Discard{Stage: a.Output.Stage})
		}
		q.repMu.Lock()
		defer q.repMu.Unlock()
		q.needLocked(a.Task, 1)
		return false
	}
	q.repMu.Lock()
	defer q.repMu.Unlock()
	q.emit(Placed{Task: a.Task, TaskID: a.TaskID, Peer: a.Peer, Digest: a.Digest, Files: a.Output.Files})
	if a.Check {
		return q.checkPlacedLocked(a)
	}
	return q.acceptPlacedLocked(a)
}

// leaseRef stands in the decided list for a lease handed out, whose
// fields its taker may still set under mu (Check, HandedOver, Start):
// unlock turns it into a LeaseOut.
type leaseRef struct{ l *Lease }

func (r leaseRef) Record() Record { return r.l.out().Record() }
func (r leaseRef) String() string { return r.l.out().String() }

func (l *Lease) out() LeaseOut {
	return LeaseOut{Lease: l.ID, Task: l.Task, TaskID: l.TaskID, Attempt: l.Attempt, Peer: l.Peer, Start: l.Start,
		DigestOnly: l.DigestOnly, Check: l.Check, HandedOver: l.HandedOver}
}

// revokeLocked takes l back (mu held): its callback runs once mu is let
// go.
func (q *Queue) revokeLocked(l *Lease) {
	if fn := revoke(l); fn != nil {
		if q.cur == nil {
			q.cur = batches.Get().(*batch)
		}
		q.cur.later = append(q.cur.later, fn)
	}
}

// revokeNow takes l back without mu held, and runs its callback.
func revokeNow(l *Lease) {
	if fn := revoke(l); fn != nil {
		fn()
	}
}
