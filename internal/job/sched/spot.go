package sched

import (
	"context"
	"fmt"
	"slices"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/report"
)

// Spot checks (spec.Verify.SpotCheck): voting cannot catch a colluding
// majority, so the submitter re-runs a random sample of accepted results
// on its own slots (Config.Self), the one party it trusts. Such a trusted
// run is decisive:
//
//   - a result picked for a check is placed but the task is not done until
//     the check agrees; the run that disagrees replaces the output, and
//     every peer that voted for the wrong digest is excluded (distrust);
//   - every task an excluded peer voted for is then verified again by a
//     trusted run, unless a quorum of peers still in good standing carries
//     it;
//   - once a check has caught someone, a task left that no remaining peer
//     can complete the vote on goes to a trusted run too, so that the job
//     ends without the liars;
//   - a task whose vote fails (no quorum) is decided by a trusted run
//     rather than failed.

// spotState is the spot checks' state.
type spotState struct {
	fraction float64 // spec.Verify.SpotCheck
	// checks are the tasks waiting for a trusted run; caught: a spot
	// check caught a wrong result.
	checks []int
	caught bool
}

// NextCheck blocks until a trusted run is wanted and returns its lease
// (for the submitter's own slot when it runs checks only), or ErrDrained
// when the job has nothing left, or ctx's error.
func (q *Queue) NextCheck(ctx context.Context) (*Lease, error) {
	return q.next(ctx, q.self, true)
}

// spotPickLocked decides whether task's accepted result is re-run on the
// submitter's slot: with probability SpotCheck, when no trusted run has
// vouched for it already.
func (q *Queue) spotPickLocked(task int) bool {
	if q.spot.fraction <= 0 || q.self == "" {
		return false
	}
	for _, v := range q.votesOf(task) {
		if v.peer == q.self {
			return false // the submitter ran it itself
		}
	}
	return q.spot.fraction >= 1 || q.rnd.Float64() < q.spot.fraction
}

// wantCheckLocked queues a trusted run of task. The task is not done until
// it ends; votes from peers are ignored meanwhile.
func (q *Queue) wantCheckLocked(task int) {
	ts := &q.tasks[task]
	if ts.check {
		return
	}
	ts.check = true
	ts.need = 0
	q.unqueueLocked(task)
	q.spot.checks = append(q.spot.checks, task)
	q.signal()
}

// takeCheckLocked leases the oldest wanted trusted run to the submitter's
// slot; with checkOnly, a slot that runs nothing else may also take a task
// that no remaining peer can complete the vote on, once a check caught a
// liar.
func (q *Queue) takeCheckLocked(checkOnly bool) *Lease {
	if len(q.spot.checks) > 0 {
		t := q.spot.checks[0]
		q.spot.checks = q.spot.checks[1:]
		l := q.leaseLocked(t, q.self, false)
		l.Check = true
		return l
	}
	if !checkOnly || !q.spot.caught {
		return nil
	}
	for _, t := range slices.Clone(q.pending) {
		if q.involvedLocked(q.self, t) || q.otherVoterLocked(t) {
			continue
		}
		q.log.Warn("no peer in good standing can complete the vote; the submitter runs the task itself", "task", q.recs.ID(t))
		q.tasks[t].check = true
		q.tasks[t].need = 0
		q.unqueueLocked(t)
		l := q.leaseLocked(t, q.self, false)
		l.Check = true
		return l
	}
	return nil
}

// checkedLocked settles a trusted run: its digest decides the task.
func (q *Queue) checkedLocked(l *Lease, res Result) (accepted, kept bool) {
	ts := &q.tasks[l.Task]
	rt := q.rec(l.Task)
	if !ts.check {
		return false, false // decided otherwise meanwhile
	}
	if res.Outcome != report.OutcomeOK {
		ts.check = false
		if res.Outcome == report.OutcomeCanceled || res.Outcome == report.OutcomeLost {
			if !q.closed {
				q.wantCheckLocked(l.Task)
			}
			return false, false
		}
		ts.failures++
		if int(ts.failures) <= q.retries {
			q.emit(Retry{Task: l.Task, TaskID: l.TaskID, Outcome: res.Outcome, Err: res.Err})
			q.wantCheckLocked(l.Task)
			return false, false
		}
		q.failLocked(l.Task, fmt.Errorf("the submitter's own run failed: %s", errText(res.Err)))
		return false, false
	}
	ts.check, ts.trusted = false, true
	q.spotStatsLocked().Checked++
	if ts.settled && res.Digest == q.accepted(l.Task) {
		rt.Verdict = appendVerdict(rt.Verdict, "spot check agrees")
		q.doneLocked(l.Task)
		return false, false
	}
	// The trusted run disagrees (or no result had been accepted): its
	// output wins, once placed (checkPlacedLocked), and whoever voted
	// otherwise lied.
	ts.placing = true
	q.emit(Accept{Task: l.Task, TaskID: rt.ID, Peer: l.Peer, Digest: res.Digest, Output: res.output(), Check: true})
	return false, true
}

// checkPlacedLocked decides a task by the trusted run whose output a
// placed: voters of another digest are excluded.
func (q *Queue) checkPlacedLocked(a Accept) bool {
	task := a.Task
	ts := &q.tasks[task]
	rt := q.rec(task)
	var liars []string
	for _, v := range q.votesOf(task) {
		if v.digest != a.Digest && v.peer != q.self && !slices.Contains(liars, v.peer) {
			liars = append(liars, v.peer)
		}
	}
	wrong := q.accepted(task)
	was := ts.settled
	ts.settled, q.m(task).accepted = true, a.Digest
	q.m(task).votes = append(q.votesOf(task), vote{peer: q.self, digest: a.Digest})
	rt.State, rt.Peer, rt.Digest, rt.Files = report.TaskRunning, a.Peer, a.Digest.String(), report.TaskFiles(rt.ID, a.Output.Files)
	rt.Votes = reportVotes(rt.Votes[:0], q.votesOf(task))
	if was {
		rt.Verdict = fmt.Sprintf("spot check: the submitter's own run gave %.12s, not the accepted %.12s; voters excluded", a.Digest.String(), wrong.String())
		q.log.Error("spot check caught a wrong result", "task", rt.ID, "accepted", wrong.String()[:12], "trusted", a.Digest.String()[:12], "voters", liars)
		sc := q.spotStatsLocked()
		sc.Caught = append(sc.Caught, report.SpotCatch{Task: rt.ID, Peers: liars, Accepted: wrong.String(), Trusted: a.Digest.String(), Time: q.now().UTC()})
	} else {
		rt.Verdict = "decided by the submitter's own run (the peers in good standing could not decide it)"
	}
	q.doneLocked(task)
	for _, p := range liars {
		q.spot.caught = true
		if tr := q.trustOf(p); !tr.excluded || tr.outvoted {
			tr.outvoted = false // a liar stays out
			if tr.excluded {
				q.rep.Excluded = slices.DeleteFunc(q.rep.Excluded, func(e report.Exclusion) bool { return e.Peer == p })
				q.emit(Reinstate{Peer: p})
				tr.excluded = false
			}
			q.excludeLocked(p, fmt.Sprintf("spot check of task %s: voted %.12s, the submitter's own run gave %.12s", rt.ID, digestOf(q.votesOf(task), p).String(), a.Digest.String()), true)
		}
	}
	if len(liars) > 0 {
		sc := q.spotStatsLocked()
		sc.Reinstated = append(sc.Reinstated, q.forgiveLocked(liars)...)
	}
	return true
}

// doneLocked counts a checked task done.
func (q *Queue) doneLocked(task int) {
	rt := q.rec(task)
	q.settleLocked(task)
	rt.State = report.TaskDone
	q.rep.Summary.Done++
	q.revokeCopiesLocked(task)
	q.cleanVotes(task)
	q.emit(Done{Task: task, TaskID: rt.ID, OK: true})
}

func (q *Queue) spotStatsLocked() *report.SpotChecks {
	if q.rep.SpotChecks == nil {
		q.rep.SpotChecks = &report.SpotChecks{Fraction: q.spot.fraction}
	}
	return q.rep.SpotChecks
}

func appendVerdict(v, s string) string {
	if v == "" {
		return s
	}
	return v + "; " + s
}

func digestOf(vs []vote, peer string) digest.ID {
	for _, v := range vs {
		if v.peer == peer {
			return v.digest
		}
	}
	return digest.ID{}
}
