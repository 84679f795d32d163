package sched

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// Finish settles a lease: records the attempt, counts the vote, and
// decides the task when it can. It returns whether the task was accepted
// with this result (its output placed). It takes over res.Stage: the
// folder is kept with the vote, placed if the vote wins, discarded
// otherwise.
func (q *Queue) Finish(l *Lease, res Result) bool {
	q.mu.Lock()
	accepted := q.finishLocked(l, res)
	return q.unlock(l.Task) || accepted
}

// FinishAll settles leases ls[i] with results rs[i] as Finish does each
// in turn, under one hold of the queue's lock: their decisions are
// applied as one batch (one Applier call, one journal pass) rather than
// one a result. A peer's batch of results takes this path.
func (q *Queue) FinishAll(ls []*Lease, rs []Result) {
	if len(ls) != len(rs) {
		panic(fmt.Sprintf("sched: FinishAll of %d leases with %d results", len(ls), len(rs)))
	}
	q.mu.Lock()
	for i, l := range ls {
		q.finishLocked(l, rs[i])
	}
	q.unlock(-1)
}

func (q *Queue) finishLocked(l *Lease, res Result) bool {
	kept := false
	defer func() {
		if !kept && res.Stage != "" {
			q.emit(Discard{Stage: res.Stage})
		}
	}()
	if l.settled {
		return false
	}
	l.settled = true
	q.revokeLocked(l) // the attempt is over: whatever waits on it may stop
	q.unrunLocked(l)
	q.moved = q.now()
	if res.Outcome != report.OutcomeLost {
		q.peers.heard[l.Peer] = q.moved
	}
	ts := &q.tasks[l.Task]
	q.dropCopyLocked(l.Task)
	defer q.signal()
	if res.End.IsZero() {
		res.End = q.now().UTC()
	}
	if l.Check {
		q.repMu.Lock()
		defer q.repMu.Unlock()
		q.recordLocked(l, res)
		var accepted bool
		accepted, kept = q.checkedLocked(l, res)
		return accepted
	}

	if q.closed && res.Outcome == report.OutcomeLost {
		res.Outcome = report.OutcomeCanceled // the run ends: nobody lost it
	}
	q.repMu.Lock()
	defer q.repMu.Unlock()
	if ts.settled || ts.placing {
		if res.Outcome != report.OutcomeOK {
			res.Outcome = report.OutcomeCanceled
		}
		q.recordLocked(l, res)
		return false
	}
	q.recordLocked(l, res)
	switch res.Outcome {
	case report.OutcomeOK:
		if q.trustOf(l.Peer).excluded {
			q.attemptErrorLocked(l.Task, "peer excluded: vote ignored")
			q.needLocked(l.Task, 1)
			return false
		}
		q.trustOf(l.Peer).losses = 0 // a valid result forgives lost attempts
		q.m(l.Task).votes = append(q.votesOf(l.Task), vote{peer: l.Peer, digest: res.Digest, out: res.output(), fetch: res.Fetch})
		kept = true
		q.backup.durations = append(q.backup.durations, res.End.Sub(l.Start))
		q.noteRunLocked(l, res)
		return q.tallyLocked(l.Task)
	case report.OutcomeRejected:
		// The plugin's check rejected the output: a lost vote.
		tr := q.trustOf(l.Peer)
		tr.invalid++
		tr.streak = 0
		if tr.invalid >= ExcludeAfter && !tr.excluded {
			q.excludeLocked(l.Peer, fmt.Sprintf("%d outputs rejected by the plugin's check", tr.invalid), true)
		}
		if int(ts.started) >= q.verify.MaxReplicas+q.retries {
			if ts.running == 0 {
				q.failLocked(l.Task, fmt.Errorf("every output was rejected by the plugin's check (%d tries)", ts.started))
			}
			return false
		}
		q.needLocked(l.Task, 1)
		return false
	case report.OutcomeCanceled:
		q.needFrontLocked(l.Task, 1)
		return false
	case report.OutcomeLost:
		return q.lostLocked(l, res)
	default:
		ts.failures++
		if int(ts.failures) <= q.retries {
			headline, _ := report.Excerpt(errText(res.Err))
			q.log.Info("task attempt failed, retrying", "task", l.TaskID, "peer", l.Peer, "outcome", res.Outcome, "err", headline)
			q.emit(Retry{Task: l.Task, TaskID: l.TaskID, Outcome: res.Outcome, Err: res.Err})
			q.needLocked(l.Task, 1)
			return false
		}
		if ts.running > 0 || ts.need > 0 {
			return false // other replicas may still decide it
		}
		if len(q.votesOf(l.Task)) > 0 {
			return q.tallyLocked(l.Task)
		}
		q.failLocked(l.Task, res.Err)
		return false
	}
}

// recordLocked appends l's attempt to the report.
func (q *Queue) recordLocked(l *Lease, res Result) {
	att := report.Attempt{Peer: l.Peer, Start: l.Start, End: res.End, Outcome: res.Outcome, Resumed: l.VC.Resumed(), HandedOver: l.HandedOver, Device: res.Device}
	if res.Err != nil {
		att.Error = res.Err.Error()
	}
	if l.Check {
		att.Check = true
	}
	rt := q.rec(l.Task)
	rt.Attempts = append(rt.Attempts, att)
	q.emit(Settle{Lease: l.ID, Task: l.Task, TaskID: l.TaskID, Attempt: att})
}

// attemptErrorLocked sets the error of task's latest attempt, just
// recorded, in its record and its Settle.
func (q *Queue) attemptErrorLocked(task int, msg string) {
	rt := q.rec(task)
	rt.Attempts[len(rt.Attempts)-1].Error = msg
	for i := len(q.cur.ds) - 1; i >= 0; i-- {
		if s, ok := q.cur.ds[i].(Settle); ok && s.Task == task {
			s.Attempt.Error = msg
			q.cur.ds[i] = s
			return
		}
	}
}

// lostLocked settles a lost attempt: the peer is charged as res.Fault
// says, and the task runs again ahead of tasks never tried, unless it was
// lost MaxLost times: then it fails, listing why each attempt was lost.
func (q *Queue) lostLocked(l *Lease, res Result) bool {
	ts := &q.tasks[l.Task]
	if q.closed {
		q.needFrontLocked(l.Task, 1) // the run ends: nobody is to blame
		return false
	}
	q.chargeLocked(l.Peer, res.Fault, res.Err)
	m := q.m(l.Task)
	m.lost = append(m.lost, l.Peer+": "+errText(res.Err))
	if len(m.lost) < q.maxLost {
		q.log.Info("lease lost, task requeued", "task", l.TaskID, "peer", l.Peer, "lost", len(m.lost), "err", res.Err)
		q.needFrontLocked(l.Task, 1)
		return false
	}
	if ts.running > 0 {
		return false // the replicas still running may decide it
	}
	err := fmt.Errorf("lost %d times: %s", len(m.lost), strings.Join(m.lost, "; "))
	q.failLocked(l.Task, err)
	q.rec(l.Task).Verdict = "failed: " + err.Error()
	return false
}

func errText(err error) string {
	if err == nil {
		return "lost"
	}
	return err.Error()
}

// needLocked asks for n more replicas of task, after the tasks already
// pending.
func (q *Queue) needLocked(task, n int) { q.requeueLocked(task, n, false) }

// needFrontLocked asks for n more replicas of task ahead of every pending
// task: its attempt was lost or taken back, and it should not wait for
// the tasks never tried.
func (q *Queue) needFrontLocked(task, n int) { q.requeueLocked(task, n, true) }

func (q *Queue) requeueLocked(task, n int, front bool) {
	ts := &q.tasks[task]
	if ts.settled || ts.placing {
		return
	}
	ts.need += int32(n)
	q.enqueueLocked(task, front)
	rt := q.rec(task)
	rt.State = report.TaskPending
	q.emit(Requeue{Task: task, TaskID: rt.ID, N: n, Front: front})
}

// settleLocked takes task out of the work left: it is decided.
func (q *Queue) settleLocked(task int) {
	ts := &q.tasks[task]
	ts.settled = true
	ts.need = 0
	q.unqueueLocked(task)
	q.remaining--
}

func (q *Queue) failLocked(task int, err error) {
	rt := q.rec(task)
	q.settleLocked(task)
	q.failed++
	rt.State = report.TaskFailed
	rt.Error = "failed"
	if err != nil {
		rt.Error = err.Error()
	}
	rt.Votes = reportVotes(rt.Votes[:0], q.votesOf(task))
	if q.Verifying() {
		rt.Verdict = "failed: " + err.Error()
	}
	q.rep.Summary.Failed++
	// The summary and the report say why in full; the log line says it
	// in one line.
	headline, _ := report.Excerpt(rt.Error)
	q.log.Warn("task failed", "task", rt.ID, "attempts", len(rt.Attempts), "err", headline)
	q.log.Debug("task failed", "task", rt.ID, "err", err)
	q.emit(Done{Task: task, TaskID: rt.ID, Err: rt.Error})
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
	if !q.keepVotes() {
		delete(q.more, task)
	}
}

// cleanVotes discards staged outputs that lost.
func (q *Queue) cleanVotes(task int) {
	for i := range q.votesOf(task) {
		v := &q.votesOf(task)[i]
		if v.out.Stage != "" {
			q.emit(Discard{Stage: v.out.Stage})
		}
		v.out = Output{}
	}
}

func (q *Queue) revokeCopiesLocked(task int) {
	if q.tasks[task].running == 0 {
		return // the usual case: no other copy (the scan is of every lease)
	}
	for _, l := range q.running {
		if l.Task == task {
			q.revokeLocked(l)
			q.unrunLocked(l)
			q.dropCopyLocked(task)
			l.settled = true
			q.cancelLocked(l, "the task was decided without it")
		}
	}
}

// Lose settles every running lease of peer as lost (the peer went away)
// and requeues their tasks at once. It returns how many leases it took.
func (q *Queue) Lose(peer string, why error) int {
	return q.settlePeer(peer, report.OutcomeLost, why)
}

// Cancel settles every running lease of peer as canceled (the run ends,
// and its session with it: nobody is to blame) and requeues their tasks.
// It returns how many leases it took.
func (q *Queue) Cancel(peer string, why error) int {
	return q.settlePeer(peer, report.OutcomeCanceled, why)
}

func (q *Queue) settlePeer(peer, outcome string, why error) int {
	q.mu.Lock()
	var ls []*Lease
	for _, l := range q.running {
		if l.Peer == peer {
			ls = append(ls, l)
		}
	}
	q.mu.Unlock()
	// Each requeued task goes to the front: the newest lease first, so
	// that the oldest runs first again.
	slices.SortFunc(ls, func(a, b *Lease) int { return cmp.Compare(b.ID, a.ID) })
	for i, l := range ls {
		revokeNow(l)
		res := Result{Outcome: outcome, Err: why}
		if i == 0 && outcome == report.OutcomeLost {
			res.Fault = FaultLost // one strike per lost session, not per lease
		}
		q.Finish(l, res)
	}
	return len(ls)
}

// revoke closes l.revoked once, whoever calls it first: a peer's lost
// session (without the queue's lock) and a replica's win that revokes
// the task's other copies (with it) may both reach the same lease. It
// returns the lease's callback, to be run by the caller without the
// queue's lock (revokeLocked, revokeNow); nil if there is none or it ran.
func revoke(l *Lease) func() {
	l.revokeMu.Lock()
	defer l.revokeMu.Unlock()
	if l.isRevoked {
		return nil
	}
	l.isRevoked = true
	close(l.revoked)
	fn := l.onRevoke
	l.onRevoke = nil
	return fn
}

// cancelLocked records a running copy l taken back, why, as a canceled
// attempt (ReportLock held).
func (q *Queue) cancelLocked(l *Lease, why string) {
	att := report.Attempt{Peer: l.Peer, Start: l.Start, End: q.now().UTC(), Outcome: report.OutcomeCanceled, Error: why}
	rt := q.rec(l.Task)
	rt.Attempts = append(rt.Attempts, att)
	q.emit(Settle{Lease: l.ID, Task: l.Task, TaskID: l.TaskID, Attempt: att})
}

// Expire revokes leases that have run longer than limit (the backstop for
// a peer that hangs without its connection breaking), and decides
// disputed tasks that no other peer can vote on any more.
func (q *Queue) Expire(limit time.Duration) {
	q.mu.Lock()
	now := q.now()
	var ls []*Lease
	for _, l := range q.running {
		if now.Sub(l.leased) > limit {
			ls = append(ls, l)
		}
	}
	// Only disputed tasks can be decided here: the list of them, not
	// every task, is scanned (a sweep runs twice a second).
	q.disputes = slices.DeleteFunc(q.disputes, func(t int) bool { return q.tasks[t].settled })
	for _, t := range slices.Clone(q.disputes) {
		ts := &q.tasks[t]
		if !ts.settled && ts.running == 0 && ts.need > 0 && !q.otherVoterLocked(t) {
			ts.need = 0
			q.unqueueLocked(t)
			q.repMu.Lock()
			q.tallyLocked(t)
			q.repMu.Unlock()
			q.signal()
		}
	}
	q.unlock(-1)
	slices.SortFunc(ls, func(a, b *Lease) int { return cmp.Compare(b.ID, a.ID) }) // as in Lose
	charged := map[string]bool{}
	for _, l := range ls {
		revokeNow(l)
		res := Result{Outcome: report.OutcomeLost, Err: errors.New("lease expired: the peer did not answer in time")}
		if !charged[l.Peer] {
			res.Fault, charged[l.Peer] = FaultLost, true // one strike per peer and sweep
		}
		q.Finish(l, res)
	}
}

// disputeLocked marks task disputed: two digests were seen, or a peer
// that voted for it was excluded.
func (q *Queue) disputeLocked(task int) {
	ts := &q.tasks[task]
	if !ts.disputed || !slices.Contains(q.disputes, task) {
		q.disputes = append(q.disputes, task)
	}
	ts.disputed = true
}
