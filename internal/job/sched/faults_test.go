package sched

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// fstep is one move of a fault scenario: peer takes a lease, which must be
// of task ("take"); ends its lease of task as ok, lost through nobody's
// fault ("dropped"), lost by the peer ("lost", FaultLost) or malformed
// ("malformed", FaultMalformed); loses its session with every lease it
// holds ("lose"); or must be refused work as excluded ("excluded").
type fstep struct{ peer, op, task string }

func fs(peer, op, task string) fstep { return fstep{peer, op, task} }

// times repeats a take-then-end cycle of one peer on one task n times.
func times(n int, peer, op, task string) []fstep {
	var ss []fstep
	for range n {
		ss = append(ss, fs(peer, "take", task), fs(peer, op, task))
	}
	return ss
}

func TestFaultsAreCharged(t *testing.T) {
	for _, c := range []struct {
		name    string
		tasks   int
		cfg     Config
		steps   []fstep
		state   []string // per task
		verdict []string // substrings, per task
		exclude []string // peer: reason substring
	}{
		{
			name: "malformed results exclude the peer after three strikes", tasks: 1,
			steps: slices.Concat(times(3, "bad", "malformed", "t0"),
				[]fstep{fs("bad", "excluded", ""), fs("good", "take", "t0"), fs("good", "ok", "t0")}),
			state:   []string{report.TaskDone},
			exclude: []string{"bad: sent 3 malformed results (last: malformed)"},
		},
		{
			name: "the strike limit is configurable", tasks: 1, cfg: Config{Strikes: 1, MaxLost: 10},
			steps:   []fstep{fs("bad", "take", "t0"), fs("bad", "malformed", "t0"), fs("bad", "excluded", "")},
			state:   []string{report.TaskPending},
			exclude: []string{"bad: sent 1 malformed results"},
		},
		{
			name: "malformed strikes are not forgiven by valid results", tasks: 3,
			steps: slices.Concat(
				times(2, "bad", "malformed", "t0"),
				[]fstep{fs("bad", "take", "t0"), fs("bad", "ok", "t0")},
				[]fstep{fs("bad", "take", "t1"), fs("bad", "malformed", "t1"), fs("bad", "excluded", "")},
			),
			state:   []string{report.TaskDone, report.TaskPending, report.TaskPending},
			exclude: []string{"bad: sent 3 malformed"},
		},
		{
			name: "lost attempts in a row exclude the peer", tasks: 1, cfg: Config{MaxLost: 10},
			steps:   slices.Concat(times(3, "flaky", "lost", "t0"), []fstep{fs("flaky", "excluded", "")}),
			state:   []string{report.TaskPending},
			exclude: []string{"flaky: lost 3 attempts in a row"},
		},
		{
			name: "a valid result forgives lost attempts", tasks: 2, cfg: Config{MaxLost: 10},
			steps: slices.Concat(
				times(2, "flaky", "lost", "t0"),
				[]fstep{fs("flaky", "take", "t0"), fs("flaky", "ok", "t0")},
				times(2, "flaky", "lost", "t1"),
				[]fstep{fs("flaky", "take", "t1"), fs("flaky", "ok", "t1")},
			),
			state: []string{report.TaskDone, report.TaskDone},
		},
		{
			name: "a lost session is one strike, however many leases it held", tasks: 3,
			steps: []fstep{
				fs("p", "take", "t0"), fs("p", "take", "t1"), fs("p", "take", "t2"), fs("p", "lose", ""),
				fs("p", "take", "t0"), fs("p", "take", "t1"), fs("p", "take", "t2"), fs("p", "lose", ""),
				fs("p", "take", "t0"), fs("p", "ok", "t0"),
			},
			state: []string{report.TaskDone, report.TaskPending, report.TaskPending},
		},
		{
			name: "a task lost MaxLost times fails with the reasons", tasks: 2, cfg: Config{MaxLost: 3},
			steps: slices.Concat(
				times(1, "a", "dropped", "t0"), times(1, "b", "dropped", "t0"), times(1, "c", "dropped", "t0"),
				[]fstep{fs("a", "take", "t1"), fs("a", "ok", "t1")},
			),
			state:   []string{report.TaskFailed, report.TaskDone},
			verdict: []string{"failed: lost 3 times: a: dropped; b: dropped; c: dropped"},
		},
		{
			name: "a lost task runs again before tasks never tried", tasks: 3,
			steps: []fstep{
				fs("a", "take", "t0"), fs("a", "take", "t1"), fs("a", "dropped", "t1"),
				fs("b", "take", "t1"), fs("b", "take", "t2"),
			},
			state: []string{report.TaskRunning, report.TaskRunning, report.TaskRunning},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.tasks, c.cfg)
			for i, s := range c.steps {
				l := f.leases[s.peer+"/"+s.task]
				switch s.op {
				case "take":
					if l := f.take(t, s.peer); l.TaskID != s.task {
						t.Fatalf("step %d: %s got a lease of %s, want %s", i, s.peer, l.TaskID, s.task)
					}
				case "excluded":
					if _, err := f.q.Next(t.Context(), s.peer); !errors.Is(err, ErrExcluded) {
						t.Fatalf("step %d: Next(%s) = %v, want ErrExcluded", i, s.peer, err)
					}
				case "lose":
					f.q.Lose(s.peer, errors.New("gone"))
				case report.OutcomeOK:
					f.finish(s.peer, s.task, s.op, "d")
				default:
					fault := map[string]Fault{"dropped": NoFault, "lost": FaultLost, "malformed": FaultMalformed}[s.op]
					f.q.Finish(l, Result{Outcome: report.OutcomeLost, Err: errors.New(s.op), Fault: fault})
				}
			}
			for i, want := range c.state {
				if got := f.rep.Tasks[i].State; got != want {
					t.Errorf("task %d state %q, want %q (attempts %+v)", i, got, want, f.rep.Tasks[i].Attempts)
				}
			}
			for i, want := range c.verdict {
				if got := f.rep.Tasks[i].Verdict; !strings.Contains(got, want) {
					t.Errorf("task %d verdict %q, want it to contain %q", i, got, want)
				}
			}
			var excluded []string
			for _, e := range f.rep.Excluded {
				excluded = append(excluded, e.Peer+": "+e.Reason)
			}
			if len(excluded) != len(c.exclude) {
				t.Fatalf("excluded %q, want %q", excluded, c.exclude)
			}
			for i, want := range c.exclude {
				if !strings.HasPrefix(excluded[i], want) {
					t.Errorf("exclusion %q, want it to start with %q", excluded[i], want)
				}
			}
		})
	}
}

func TestLostAfterCloseChargesNobody(t *testing.T) {
	f := newFixture(t, 1, Config{MaxLost: 1, Strikes: 1})
	l := f.take(t, "p")
	f.q.Close()
	f.q.Finish(l, Result{Outcome: report.OutcomeLost, Err: errors.New("the run ended"), Fault: FaultLost})
	if got := f.rep.Tasks[0].State; got != report.TaskPending {
		t.Errorf("task state %q, want pending (a rerun resumes it)", got)
	}
	if len(f.rep.Excluded) != 0 {
		t.Errorf("excluded %+v after the run ended", f.rep.Excluded)
	}
	if a := f.rep.Tasks[0].Attempts; len(a) != 1 || a[0].Outcome != report.OutcomeCanceled {
		t.Errorf("attempts %+v, want one canceled (nobody lost it)", a)
	}
}

// A session that ends because the run ends (Ctrl-C) cancels its leases:
// they are not lost, and nobody is charged, even before Close.
func TestCancelChargesNobody(t *testing.T) {
	f := newFixture(t, 2, Config{MaxLost: 1, Strikes: 1})
	f.take(t, "p")
	f.take(t, "p")
	if n := f.q.Cancel("p", errors.New("the run ended")); n != 2 {
		t.Fatalf("Cancel took %d leases, want 2", n)
	}
	for _, task := range f.rep.Tasks {
		if task.State != report.TaskPending || len(task.Attempts) != 1 || task.Attempts[0].Outcome != report.OutcomeCanceled {
			t.Errorf("task %s: state %s, attempts %+v; want pending after one canceled attempt", task.ID, task.State, task.Attempts)
		}
	}
	if len(f.rep.Excluded) != 0 {
		t.Errorf("excluded %+v for the run's end", f.rep.Excluded)
	}
}

func TestStalled(t *testing.T) {
	const after = 10 * time.Second
	for _, c := range []struct {
		name    string
		cfg     Config
		setup   func(f *fixture)
		stalled bool
		why     []string
	}{
		{
			name:  "nothing happened for a while, no peer",
			setup: func(f *fixture) { f.clock.advance(after) }, stalled: true,
			why: []string{"2 task(s) left, none running", "no peer has taken part"},
		},
		{
			name:  "not for long enough",
			setup: func(f *fixture) { f.clock.advance(after - time.Second) },
		},
		{
			name: "a lease runs",
			setup: func(f *fixture) {
				f.q.TryNext("a")
				f.clock.advance(2 * after)
			},
		},
		{
			name: "the only peer refused the job",
			setup: func(f *fixture) {
				f.q.Refused("p1", "disk full")
				f.clock.advance(after)
			},
			stalled: true, why: []string{"p1: refused the job: disk full"},
		},
		{
			name: "peers excluded or failing",
			cfg:  Config{Strikes: 1},
			setup: func(f *fixture) {
				l := f.q.TryNext("bad")
				f.q.Finish(l, Result{Outcome: report.OutcomeLost, Err: errors.New("digest mismatch"), Fault: FaultMalformed})
				f.q.SessionFailed("far", errors.New("connection refused"))
				f.clock.advance(after)
			},
			stalled: true,
			why:     []string{"bad: excluded: sent 1 malformed results (last: digest mismatch)", "far: session failed: connection refused"},
		},
		{
			name: "waiting for --min-peers",
			cfg:  Config{MinPeers: 2},
			setup: func(f *fixture) {
				f.q.Enrol("p1", "")
				f.clock.advance(after)
			},
			stalled: true, why: []string{"waiting for 2 peer(s) to enrol (--min-peers), 1 did"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 2, c.cfg)
			c.setup(f)
			why, stalled := f.q.Stalled(after)
			if stalled != c.stalled {
				t.Fatalf("Stalled = %v (%q), want %v", stalled, why, c.stalled)
			}
			for _, w := range c.why {
				if !strings.Contains(why, w) {
					t.Errorf("why %q, want it to contain %q", why, w)
				}
			}
		})
	}
}
