package sched

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

func spotVerify(replicas, quorum int, spot float64) spec.Verify {
	v := verify(replicas, quorum, 2*replicas)
	v.SpotCheck = spot
	return v
}

// check has the submitter's check-only slot take a trusted run, which must
// be of task (any, if "").
func (f *fixture) check(t *testing.T, task string) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a bound on a failing test, not a wait
	defer cancel()
	l, err := f.q.NextCheck(ctx)
	if err != nil {
		t.Fatalf("NextCheck: %v", err)
	}
	if !l.Check || (task != "" && l.TaskID != task) || l.Peer != "me" {
		t.Fatalf("NextCheck: lease %+v, want a check of %s by me", l, task)
	}
	f.leases["me/"+l.TaskID] = l
	return l
}

// waitFor waits for cond (under the queue's lock) to hold, at each change
// of the queue.
func (f *fixture) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(5 * time.Second) // a bound on a failing test, not a wait
	for {
		ch := f.q.Changed()
		f.q.mu.Lock()
		ok := cond()
		f.q.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("waited in vain for %s", what)
		}
	}
}

func noCheck(t *testing.T, f *fixture) {
	t.Helper()
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	if l := f.q.takeCheckLocked(true); l != nil {
		t.Fatalf("a check of %s was handed out, want none", l.TaskID)
	}
}

func TestSpotCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		v    spec.Verify
		// tasks; run drives the queue through the scenario.
		tasks   int
		run     func(t *testing.T, f *fixture)
		state   []string
		verdict []string
		placed  map[string]string
		exclude []string
		checked int
		caught  []string // tasks
	}{
		{
			name: "no spot check: a colluding majority wins", v: spotVerify(2, 2, 0), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "x")
				f.take(t, "y")
				f.finish("x", "t0", report.OutcomeOK, "bad")
				f.finish("y", "t0", report.OutcomeOK, "bad")
				noCheck(t, f)
			},
			state:  []string{report.TaskDone},
			placed: map[string]string{"t0": "stage-x-1"},
		},
		{
			name: "the check agrees: done", v: spotVerify(2, 2, 1), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "a")
				f.take(t, "b")
				f.finish("a", "t0", report.OutcomeOK, "good")
				f.finish("b", "t0", report.OutcomeOK, "good")
				if f.rep.Tasks[0].State == report.TaskDone {
					t.Fatal("done before its spot check")
				}
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeOK, "good")
			},
			state: []string{report.TaskDone}, verdict: []string{"accepted: 2 of 2 votes agree; spot check pending; spot check agrees"},
			placed:  map[string]string{"t0": "stage-a-1"},
			checked: 1,
		},
		{
			name: "the check catches a colluding majority; the honest vote stays", v: spotVerify(3, 2, 1), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "x")
				f.take(t, "y")
				f.take(t, "h")
				f.finish("x", "t0", report.OutcomeOK, "bad")
				f.finish("y", "t0", report.OutcomeOK, "bad")
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeOK, "good")
			},
			state: []string{report.TaskDone}, verdict: []string{"spot check: the submitter's own run gave"},
			placed:  map[string]string{"t0": "stage-me-4"},
			exclude: []string{"x", "y"}, checked: 1, caught: []string{"t0"},
		},
		{
			name: "what the caught peers voted for is verified again on the submitter", v: spotVerify(2, 2, 1), tasks: 2,
			run: func(t *testing.T, f *fixture) {
				// Both tasks are accepted on the liars' word; t1's check is
				// still queued when t0's catches them.
				for range 2 {
					f.take(t, "x")
					f.take(t, "y")
				}
				for _, task := range []string{"t0", "t1"} {
					f.finish("x", task, report.OutcomeOK, "bad")
					f.finish("y", task, report.OutcomeOK, "bad")
				}
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeOK, "good0")
				f.check(t, "t1")
				f.finish("me", "t1", report.OutcomeOK, "good1")
			},
			state:   []string{report.TaskDone, report.TaskDone},
			placed:  map[string]string{"t0": "stage-me-5", "t1": "stage-me-6"},
			exclude: []string{"x", "y"}, checked: 2, caught: []string{"t0", "t1"},
		},
		{
			name: "after a catch, a task no peer can complete the vote on runs on the submitter", v: spotVerify(2, 2, 1), tasks: 2,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "x") // t0
				f.take(t, "y") // t0
				f.take(t, "x") // t1
				f.take(t, "h") // t1
				f.finish("x", "t0", report.OutcomeOK, "bad")
				f.finish("y", "t0", report.OutcomeOK, "bad")
				f.finish("h", "t1", report.OutcomeOK, "good1")
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeOK, "good0")
				// x's vote on t1 is gone; h voted already; nobody else.
				f.check(t, "t1")
				f.finish("me", "t1", report.OutcomeOK, "good1")
			},
			state:   []string{report.TaskDone, report.TaskDone},
			verdict: []string{"spot check:", "decided by the submitter's own run"},
			placed:  map[string]string{"t0": "stage-me-5", "t1": "stage-me-6"},
			exclude: []string{"x", "y"}, checked: 2, caught: []string{"t0"},
		},
		{
			name: "an honest minority outvoted by the liars is reinstated when they are caught", v: spotVerify(3, 2, 1), tasks: 3,
			run: func(t *testing.T, f *fixture) {
				for _, p := range []string{"h", "x", "y"} {
					for range 3 {
						f.take(t, p)
					}
				}
				for _, task := range []string{"t0", "t1", "t2"} {
					f.finish("h", task, report.OutcomeOK, "good")
					f.finish("x", task, report.OutcomeOK, "bad")
					f.finish("y", task, report.OutcomeOK, "bad")
				}
				// The liars' outputs are fetched (digest-only replicas), then
				// accepted and judged.
				f.waitFor(t, "h to be outvoted out of the job", func() bool { return f.q.trustOf("h").excluded })
				for range 3 { // in the order the fetches ended
					l := f.check(t, "")
					f.finish("me", l.TaskID, report.OutcomeOK, "good")
				}
				if sc := f.rep.SpotChecks; sc == nil || len(sc.Reinstated) != 1 || sc.Reinstated[0] != "h" {
					t.Errorf("reinstated %+v, want h", f.rep.SpotChecks)
				}
				f.waitFor(t, "h to be reinstated", func() bool { return !f.q.trustOf("h").excluded })
			},
			state:   []string{report.TaskDone, report.TaskDone, report.TaskDone},
			exclude: []string{"x", "y"}, checked: 3, caught: []string{"t0", "t1", "t2"},
		},
		{
			name: "with spot checks, no quorum is decided by the submitter's run", v: spotVerify(2, 2, 1), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "a")
				f.take(t, "b")
				f.finish("a", "t0", report.OutcomeOK, "good")
				f.finish("b", "t0", report.OutcomeOK, "bad")
				f.waitFor(t, "a trusted run to be wanted", func() bool { return len(f.q.spot.checks) == 1 })
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeOK, "good")
			},
			state: []string{report.TaskDone}, verdict: []string{"decided by the submitter's own run"},
			placed:  map[string]string{"t0": "stage-me-3"},
			exclude: []string{"b"}, checked: 1,
		},
		{
			name: "the submitter's own vote needs no check", v: spotVerify(2, 2, 1), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "me")
				f.take(t, "a")
				f.finish("me", "t0", report.OutcomeOK, "good")
				f.finish("a", "t0", report.OutcomeOK, "good")
				noCheck(t, f)
			},
			state: []string{report.TaskDone},
		},
		{
			name: "a failed check is retried, then fails the task loudly", v: spotVerify(1, 1, 1), tasks: 1,
			run: func(t *testing.T, f *fixture) {
				f.take(t, "a")
				f.finish("a", "t0", report.OutcomeOK, "good")
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeTaskError, "")
				f.check(t, "t0")
				f.finish("me", "t0", report.OutcomeTaskError, "")
			},
			state: []string{report.TaskFailed},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.tasks, Config{Verify: c.v, Self: "me", Retries: 1})
			c.run(t, f)
			f.waitDone(t)
			f.expect(t, c.state, c.verdict, c.placed, c.exclude)
			var checked int
			var caught []string
			if sc := f.rep.SpotChecks; sc != nil {
				checked = sc.Checked
				for _, x := range sc.Caught {
					caught = append(caught, x.Task)
				}
				slices.Sort(caught)
			}
			if checked != c.checked || !slices.Equal(caught, c.caught) {
				t.Errorf("spot checks: %d checked, caught %v; want %d, %v", checked, caught, c.checked, c.caught)
			}
			if done := f.rep.Summary.Done + f.rep.Summary.Failed; done != c.tasks {
				t.Errorf("summary counts %d settled tasks, want %d", done, c.tasks)
			}
		})
	}
}
