package job

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// errDrained: no task is left to lease; the worker should stop.
var errDrained = errors.New("no tasks left")

// lease is one attempt of a task handed to one worker.
type lease struct {
	id      uint64
	task    int // index into the spec's tasks
	taskID  string
	attempt int
	peer    string
	start   time.Time
	backup  bool
	// revoked is closed when the lease is taken back: another copy won, the
	// lease timed out, or the run ends. The worker should stop the attempt.
	revoked chan struct{}
	settled bool
	// Guarded by the job's vcState: messages this attempt has received,
	// and whether it resumed from a checkpoint.
	consumed uint64
	resumed  bool
}

// queue hands out leases, takes results and decides retries. It is the
// scheduling heart of a job: workers (local slots, remote peers) pull
// leases from it, so fast workers take more work and nobody is flooded.
type queue struct {
	r *runner

	mu        sync.Mutex
	wake      chan struct{} // closed and replaced when something changes
	pending   []int
	running   map[uint64]*lease
	copies    map[int]int // running leases per task
	settled   map[int]bool
	remaining int
	failed    int
	nextID    uint64
	durations []time.Duration // of successful attempts, for backup decisions
	closed    bool
}

func newQueue(r *runner, pending []int) *queue {
	return &queue{
		r:         r,
		wake:      make(chan struct{}),
		pending:   pending,
		running:   map[uint64]*lease{},
		copies:    map[int]int{},
		settled:   map[int]bool{},
		remaining: len(pending),
	}
}

func (q *queue) signal() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// drained is closed-state: every task settled or the queue closed.
func (q *queue) drainedLocked() bool { return q.remaining == 0 || q.closed }

// next blocks until a task can be leased to peer and returns the lease,
// or errDrained when the job has nothing left, or ctx's error.
func (q *queue) next(ctx context.Context, peer string) (*lease, error) {
	for {
		q.mu.Lock()
		if q.drainedLocked() {
			q.mu.Unlock()
			return nil, errDrained
		}
		if l := q.takeLocked(peer); l != nil {
			q.mu.Unlock()
			return l, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-time.After(250 * time.Millisecond): // re-check backup candidates
		}
	}
}

func (q *queue) takeLocked(peer string) *lease {
	for i, t := range q.pending {
		if q.holdsLocked(peer, t) {
			continue
		}
		q.pending = slices.Delete(q.pending, i, i+1)
		return q.leaseLocked(t, peer, false)
	}
	if len(q.pending) > 0 {
		return nil
	}
	// Nothing pending: near the end of the job an idle worker may run a
	// backup copy of the slowest running task (first valid result wins).
	if t, ok := q.backupCandidateLocked(peer); ok {
		return q.leaseLocked(t, peer, true)
	}
	return nil
}

func (q *queue) holdsLocked(peer string, task int) bool {
	for _, l := range q.running {
		if l.task == task && l.peer == peer {
			return true
		}
	}
	return false
}

// backupCandidateLocked picks the running task that has run longest, if
// it has only one copy, is not held by peer, and has run for more than
// twice the median successful attempt (and at least a second).
func (q *queue) backupCandidateLocked(peer string) (int, bool) {
	if len(q.durations) == 0 {
		return 0, false
	}
	d := slices.Clone(q.durations)
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	threshold := max(2*d[len(d)/2], time.Second)
	var best *lease
	for _, l := range q.running {
		if q.copies[l.task] != 1 || l.peer == peer || time.Since(l.start) < threshold {
			continue
		}
		if best == nil || l.start.Before(best.start) {
			best = l
		}
	}
	if best == nil {
		return 0, false
	}
	return best.task, true
}

func (q *queue) leaseLocked(task int, peer string, backup bool) *lease {
	q.nextID++
	r := q.r
	r.mu.Lock()
	rt := &r.rep.Tasks[task]
	attempt := len(rt.Attempts) + q.copies[task]
	rt.State = report.TaskRunning
	r.mu.Unlock()
	l := &lease{
		id:      q.nextID,
		task:    task,
		taskID:  rt.ID,
		attempt: attempt,
		peer:    peer,
		start:   time.Now().UTC(),
		backup:  backup,
		revoked: make(chan struct{}),
	}
	q.running[l.id] = l
	q.copies[task]++
	return l
}

// result is what a worker reports for a lease.
type result struct {
	outcome string
	err     error
	// stage is a folder holding the complete output (outcome ok only); it is
	// renamed into place if this copy wins, removed otherwise.
	stage  string
	digest string
	files  []string
	end    time.Time
}

// finish settles a lease. It returns false when the lease was no longer
// current (revoked, or another copy already won) and the result was
// discarded.
func (q *queue) finish(l *lease, res result) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if l.settled {
		return false
	}
	l.settled = true
	delete(q.running, l.id)
	q.copies[l.task]--
	defer q.signal()

	r := q.r
	if res.end.IsZero() {
		res.end = time.Now().UTC()
	}
	att := report.Attempt{Peer: l.peer, Start: l.start, End: res.end, Outcome: res.outcome, Resumed: q.r.vc.wasResumed(l)}
	if res.err != nil {
		att.Error = res.err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rt := &r.rep.Tasks[l.task]
	r.dirty = true
	if q.settled[l.task] {
		// Another copy already won; record nothing more than the attempt.
		if res.outcome != report.OutcomeOK {
			att.Outcome = report.OutcomeCanceled
		}
		rt.Attempts = append(rt.Attempts, att)
		return false
	}
	rt.Attempts = append(rt.Attempts, att)
	job := r.p.Spec
	switch {
	case res.outcome == report.OutcomeOK:
		if err := r.place(l.taskID, res.stage); err != nil {
			rt.Attempts[len(rt.Attempts)-1].Outcome = report.OutcomeLost
			rt.Attempts[len(rt.Attempts)-1].Error = err.Error()
			q.requeueLocked(l.task)
			return false
		}
		q.settled[l.task] = true
		q.remaining--
		q.durations = append(q.durations, res.end.Sub(l.start))
		rt.State, rt.Peer, rt.Digest, rt.Files = report.TaskDone, l.peer, res.digest, relFiles(l.taskID, res.files)
		r.rep.Summary.Done++
		q.revokeCopiesLocked(l.task)
		r.opts.Events.TaskDone(l.taskID, true)
		return true
	case res.outcome == report.OutcomeCanceled:
		q.requeueLocked(l.task)
		return false
	case q.copies[l.task] > 0:
		// Another copy is still running: let it decide.
		return false
	case res.outcome == report.OutcomeLost || countedAttempts(rt.Attempts) <= job.Retries:
		r.log.Info("task attempt failed, retrying", "task", l.taskID, "peer", l.peer, "outcome", res.outcome, "err", res.err)
		r.opts.Events.TaskRetry(l.taskID, res.outcome, res.err)
		q.requeueLocked(l.task)
		return false
	default:
		q.settled[l.task] = true
		q.remaining--
		q.failed++
		rt.State = report.TaskFailed
		r.rep.Summary.Failed++
		r.log.Warn("task failed", "task", l.taskID, "attempts", len(rt.Attempts), "err", res.err)
		r.opts.Events.TaskDone(l.taskID, false)
		return false
	}
}

func (q *queue) requeueLocked(task int) {
	if q.settled[task] || q.copies[task] > 0 || slices.Contains(q.pending, task) {
		return
	}
	q.pending = append(q.pending, task)
	q.r.rep.Tasks[task].State = report.TaskPending
}

func (q *queue) revokeCopiesLocked(task int) {
	for _, l := range q.running {
		if l.task == task {
			close(l.revoked)
			delete(q.running, l.id)
			q.copies[task]--
			l.settled = true
			q.r.rep.Tasks[task].Attempts = append(q.r.rep.Tasks[task].Attempts, report.Attempt{
				Peer: l.peer, Start: l.start, End: time.Now().UTC(), Outcome: report.OutcomeCanceled, Error: "another copy finished first",
			})
		}
	}
}

// lose settles every running lease of peer as lost (the peer went away)
// and requeues their tasks at once.
func (q *queue) lose(peer string, why error) int {
	q.mu.Lock()
	var ls []*lease
	for _, l := range q.running {
		if l.peer == peer {
			ls = append(ls, l)
		}
	}
	q.mu.Unlock()
	n := 0
	for _, l := range ls {
		select {
		case <-l.revoked:
		default:
			close(l.revoked)
		}
		q.finish(l, result{outcome: report.OutcomeLost, err: why})
		n++
	}
	return n
}

// expire revokes leases that have run longer than limit: the backstop for
// a peer that hangs without its connection breaking.
func (q *queue) expire(limit time.Duration) {
	q.mu.Lock()
	var ls []*lease
	for _, l := range q.running {
		if time.Since(l.start) > limit {
			ls = append(ls, l)
		}
	}
	q.mu.Unlock()
	for _, l := range ls {
		select {
		case <-l.revoked:
		default:
			close(l.revoked)
		}
		q.finish(l, result{outcome: report.OutcomeLost, err: errors.New("lease expired: the peer did not answer in time")})
	}
}

// close ends the queue: workers waiting in next get errDrained.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	for _, l := range q.running {
		select {
		case <-l.revoked:
		default:
			close(l.revoked)
		}
	}
	q.signal()
}

// done reports whether every task is settled, and how many failed.
func (q *queue) done() (bool, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.remaining == 0, q.failed
}

// doneCh returns a channel closed at the next change.
func (q *queue) changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}
