package report

import "testing"

func TestRunsDescribe(t *testing.T) {
	at := func(outcomes ...string) *Task {
		t := &Task{}
		for _, o := range outcomes {
			t.Attempts = append(t.Attempts, Attempt{Outcome: o})
		}
		return t
	}
	check := at(OutcomeTaskError)
	check.Attempts = append(check.Attempts, Attempt{Outcome: OutcomeOK, Check: true})
	for _, tc := range []struct {
		t        *Task
		retries  int
		verified bool
		want     string
	}{
		{at(OutcomeTaskError), 0, false, "1 attempt"},
		{at(OutcomeTaskError, OutcomeCrashed), 1, false, "2 attempts"},
		{at(OutcomeOK, OutcomeOK), 1, true, "2 attempts"}, // no quorum
		{at(OutcomeTaskError, OutcomeTaskError, OutcomeTaskError), 1, true, "3 attempts: 1 try + 1 retry (retries: 1) + 1 replica running alongside"},
		{at(OutcomeTaskError, OutcomeTimeout), 0, false, "2 attempts: 1 try + 1 backup copy running alongside"},
		{at(OutcomeTaskError, OutcomeLost, OutcomeCrashed, OutcomeTaskError), 2, false, "4 attempts: 1 try + 2 retries (retries: 2) + 1 lost to a peer (not a retry)"},
		{at(OutcomeLost, OutcomeLost), 2, false, "2 attempts: 2 lost to peers (not retries)"},
		{at(OutcomeTaskError, OutcomeCanceled, OutcomeRejected, OutcomeOK), 0, true, "4 attempts: 1 try + 1 ok + 1 outvoted + 1 stopped once not needed"},
		{check, 0, false, "2 attempts: 1 try + 1 spot check"},
	} {
		if got := CountRuns(tc.t).Describe(tc.retries, tc.verified); got != tc.want {
			t.Errorf("%v, retries %d: got %q, want %q", tc.t.Attempts, tc.retries, got, tc.want)
		}
	}
}
