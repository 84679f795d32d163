package report

import (
	"fmt"
	"strings"
)

// Runs counts a failed task's attempts by what each counts against, so
// that a task with `retries: 1` and three attempts reads as what happened
// (a try, a retry, and a replica that was running alongside), not as a
// broken limit.
type Runs struct {
	// Failed: task_error, crashed, timeout; the only outcomes that count
	// against the spec's retries.
	Failed int
	// Lost: lost to the infrastructure (a peer gone, a result malformed
	// or not delivered); they count against --max-lost, not retries.
	Lost int
	// OK: finished with a result (one per replica in a verified job).
	OK int
	// Outvoted: rejected, a replica whose result lost the vote.
	Outvoted int
	// Stopped: canceled, a copy stopped once the task was decided, or an
	// attempt the run's end stopped.
	Stopped int
	// Checks: trusted re-runs on the submitter (spot checks), whatever
	// their outcome.
	Checks int
}

// CountRuns counts t's attempts.
func CountRuns(t *Task) Runs {
	var r Runs
	for _, a := range t.Attempts {
		switch {
		case a.Check:
			r.Checks++
		case a.Outcome == OutcomeTaskError, a.Outcome == OutcomeCrashed, a.Outcome == OutcomeTimeout:
			r.Failed++
		case a.Outcome == OutcomeLost:
			r.Lost++
		case a.Outcome == OutcomeOK:
			r.OK++
		case a.Outcome == OutcomeRejected:
			r.Outvoted++
		default:
			r.Stopped++
		}
	}
	return r
}

// Total is the number of attempts counted.
func (r Runs) Total() int { return r.Failed + r.Lost + r.OK + r.Outvoted + r.Stopped + r.Checks }

// Describe names the attempts of a failed task of a job with the given
// retries (verified: a job with verify.replicas, whose copies running at
// once are replicas; else they are backup copies near the job's end). A
// task fails at its retries+1st failure: failures beyond that are copies
// that were running alongside and failed too. "2 attempts" when they are
// only the try and its retries, else split:
// "3 attempts: 1 try + 1 retry (retries: 1) + 1 replica running alongside".
func (r Runs) Describe(retries int, verified bool) string {
	n := r.Total()
	head := count(n, "attempt", "attempts")
	tries := min(r.Failed, retries+1)
	copies := r.Failed - tries
	if n == r.Failed && copies == 0 || n == r.OK {
		return head
	}
	var parts []string
	if tries > 0 {
		parts = append(parts, "1 try")
	}
	if tries > 1 {
		parts = append(parts, fmt.Sprintf("%s (retries: %d)", count(tries-1, "retry", "retries"), retries))
	}
	if copies > 0 {
		kind := count(copies, "backup copy", "backup copies")
		if verified {
			kind = count(copies, "replica", "replicas")
		}
		parts = append(parts, kind+" running alongside")
	}
	for _, k := range []struct {
		n           int
		one, others string
	}{
		{r.Lost, "lost to a peer (not a retry)", "lost to peers (not retries)"},
		{r.OK, "ok", "ok"},
		{r.Outvoted, "outvoted", "outvoted"},
		{r.Stopped, "stopped once not needed", "stopped once not needed"},
		{r.Checks, "spot check", "spot checks"},
	} {
		if k.n > 0 {
			parts = append(parts, count(k.n, k.one, k.others))
		}
	}
	return head + ": " + strings.Join(parts, " + ")
}

// count is "1 retry", "2 retries".
func count(n int, one, others string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, others)
}
