package sched

import (
	"fmt"
	"slices"

	"github.com/p2pc/p2pc/internal/report"
)

// Replay applies decisions, in the order they were made, to rep, whose
// Tasks hold each task's record as the run started (its ID; pending): it
// gives each task's state, attempts, accepted output (peer, digest,
// files) and error, the summary's done and failed counts, and the
// exclusions, as the queue gave them. The verdicts, votes and spot-check
// figures explain decisions and are not replayed.
func Replay(rep *report.Report, ds []Decision) error {
	for _, d := range ds {
		if err := replay(rep, d); err != nil {
			return err
		}
	}
	return nil
}

func replay(rep *report.Report, d Decision) error {
	var t *report.Task
	if i, ok := Changed(d); ok {
		if i < 0 || i >= len(rep.Tasks) {
			return fmt.Errorf("replay %s: no task %d", d, i)
		}
		t = &rep.Tasks[i]
	}
	switch d := d.(type) {
	case LeaseOut:
		t.State = report.TaskRunning
	case Settle:
		t.Attempts = append(t.Attempts, d.Attempt)
	case Requeue:
		t.State = report.TaskPending
	case Placed:
		// Done when its Done follows; until then a spot check is pending.
		t.State, t.Peer, t.Digest, t.Files = report.TaskRunning, d.Peer, d.Digest.String(), report.TaskFiles(t.ID, d.Files)
	case Done:
		if d.OK {
			t.State = report.TaskDone
			rep.Summary.Done++
		} else {
			t.State, t.Error = report.TaskFailed, d.Err
			rep.Summary.Failed++
		}
	case Retry:
		if d.Outcome == OutcomeReopened {
			if t.State == report.TaskDone {
				rep.Summary.Done--
			}
			t.State = report.TaskPending
		}
	case Exclude:
		rep.Excluded = append(rep.Excluded, report.Exclusion{Peer: d.Peer, Reason: d.Reason, Time: d.Time})
	case Reinstate:
		rep.Excluded = slices.DeleteFunc(rep.Excluded, func(e report.Exclusion) bool { return e.Peer == d.Peer })
	case Accept, Discard, leaseRef:
		// Effects, not state: the output placed (Placed says so), a stage
		// removed.
	default:
		return fmt.Errorf("replay: unknown decision %T", d)
	}
	return nil
}
