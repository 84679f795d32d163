package sched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/digest"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// fakeEnv records what the queue asks of its surroundings.
type fakeEnv struct {
	mu        sync.Mutex
	placed    map[string]string // task ID -> stage
	discarded []string
	done      map[string]bool
	retries   []string // "id outcome"
	placeErr  error
	fetched   []string // task IDs fetched
	fetchErr  error
	decisions []Decision
	q         *Queue // set once made: Apply checks its lock is free
	underLock atomic.Bool
}

func newFakeEnv() *fakeEnv { return &fakeEnv{placed: map[string]string{}, done: map[string]bool{}} }

func (e *fakeEnv) Place(_ int, id string, out Output) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.placeErr != nil {
		return e.placeErr
	}
	e.placed[id] = out.Stage
	if out.Inline {
		e.placed[id] = "inline:" + string(out.Data)
	}
	return nil
}

// Apply carries out decisions as the runner does, and records them. It
// notes a batch applied with the queue's lock held: it asks the queue
// for its state, which takes the lock.
func (e *fakeEnv) Apply(ds []Decision) []error {
	if e.q != nil {
		e.unlocked()
		e.mu.Lock()
		e.decisions = append(e.decisions, ds...)
		e.mu.Unlock()
	}
	var errs []error
	for i, d := range ds {
		var err error
		switch d := d.(type) {
		case Accept:
			err = e.Place(d.Task, d.TaskID, d.Output)
		case Discard:
			e.Discard(d.Stage)
		case Done:
			e.TaskDone(d.TaskID, d.OK)
		case Retry:
			e.TaskRetry(d.TaskID, d.Outcome, d.Err)
		}
		if err != nil {
			if errs == nil {
				errs = make([]error, len(ds))
			}
			errs[i] = err
		}
	}
	return errs
}

// unlocked notes a decision applied with the queue's lock held (the
// fixture then fails the test): the queue's state cannot be read.
func (e *fakeEnv) unlocked() {
	if e.underLock.Load() {
		return
	}
	done := make(chan struct{})
	go func() {
		e.q.Running()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // a bound on a failing test, not a wait
		e.underLock.Store(true) // the fixture fails the test when it ends
	}
}

func (e *fakeEnv) Discard(stage string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.discarded = append(e.discarded, stage)
}

func (e *fakeEnv) Fetch(ctx context.Context, id string, _ digest.ID, fetch FetchFunc) (string, []string, error) {
	e.mu.Lock()
	e.fetched = append(e.fetched, id)
	ferr := e.fetchErr
	e.mu.Unlock()
	if ferr != nil {
		return "", nil, ferr
	}
	dir := "fetched-" + id
	if err := fetch(ctx, dir); err != nil {
		return "", nil, err
	}
	return dir, []string{"data"}, nil
}

func (e *fakeEnv) TaskDone(id string, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done[id] = ok
}

func (e *fakeEnv) TaskRetry(id, outcome string, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.retries = append(e.retries, id+" "+outcome)
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	q     *Queue
	rep   *report.Report
	env   *fakeEnv
	clock *fakeClock
	// leases holds each peer's latest lease of each task ("peer/task").
	leases map[string]*Lease
}

// newFixture makes a queue over n tasks t0..t(n-1), all pending but
// those in cfg.Held.
func newFixture(t testing.TB, n int, cfg Config) *fixture {
	t.Helper()
	f := &fixture{
		rep:    &report.Report{Tasks: make([]report.Task, n)},
		env:    newFakeEnv(),
		clock:  &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		leases: map[string]*Lease{},
	}
	for i := range f.rep.Tasks {
		f.rep.Tasks[i] = report.Task{ID: fmt.Sprintf("t%d", i), State: report.TaskPending}
		if !slices.Contains(cfg.Held, i) {
			cfg.Pending = append(cfg.Pending, i)
		}
	}
	cfg.JobID = "job-" + t.Name()
	cfg.Report, cfg.ReportLock, cfg.Apply, cfg.Clock = f.rep, &sync.Mutex{}, f.env, f.clock
	f.q = New(cfg)
	if _, bench := t.(*testing.B); !bench {
		// Every test checks, when it ends, that no decision was applied
		// under the queue's lock and that its decisions replay into its
		// report.
		f.env.q = f.q
		t.Cleanup(func() { f.replayed(t) }) // after Close: cleanups run last first
	}
	t.Cleanup(f.q.Close)
	return f
}

// take leases the next task to peer, which must get one at once.
func (f *fixture) take(t *testing.T, peer string) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // a bound on a failing test, not a wait
	defer cancel()
	l, err := f.q.Next(ctx, peer)
	if err != nil {
		t.Fatalf("Next(%s): %v", peer, err)
	}
	f.leases[peer+"/"+l.TaskID] = l
	return l
}

// idle makes peer a worker that waits in Next for work.
func (f *fixture) idle(peer string) {
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	f.q.peers.workers[peer] = f.clock.Now()
}

// finish ends peer's lease of task with outcome (and digest).
func (f *fixture) finish(peer, task, outcome, digest string) bool {
	l := f.leases[peer+"/"+task]
	res := Result{Outcome: outcome, Digest: dg(digest), End: f.clock.Now().Add(time.Second)}
	if outcome == report.OutcomeOK {
		if l.DigestOnly {
			res.Fetch = func(context.Context, string) error { return nil }
		} else {
			res.Stage = fmt.Sprintf("stage-%s-%d", peer, l.ID)
			res.Files = []string{"data"}
		}
	} else {
		res.Err = errors.New(outcome)
	}
	return f.q.Finish(l, res)
}

// waitDone waits until the queue has settled every task (a fetch runs on a
// goroutine of its own).
func (f *fixture) waitDone(t *testing.T) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		ch := f.q.Changed()
		if all, _ := f.q.Done(); all {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatal("the queue did not settle")
		}
	}
}

// expect checks each task's state and verdict (a substring), where outputs
// were placed from, and which peers were excluded.
func (f *fixture) expect(t *testing.T, state, verdict []string, placed map[string]string, exclude []string) {
	t.Helper()
	for i, want := range state {
		if got := f.rep.Tasks[i].State; got != want {
			t.Errorf("task %d state %q, want %q (attempts %+v)", i, got, want, f.rep.Tasks[i].Attempts)
		}
		// A failed task always says why; another never has an error.
		if why := f.rep.Tasks[i].Error; (want == report.TaskFailed) != (why != "") {
			t.Errorf("task %d (%s): error %q", i, want, why)
		}
	}
	for i, want := range verdict {
		if got := f.rep.Tasks[i].Verdict; !strings.Contains(got, want) {
			t.Errorf("task %d verdict %q, want it to contain %q", i, got, want)
		}
	}
	for id, want := range placed {
		if got := f.env.placed[id]; got != want {
			t.Errorf("placed %s from %q, want %q", id, got, want)
		}
	}
	var excluded []string
	for _, e := range f.rep.Excluded {
		excluded = append(excluded, e.Peer)
	}
	slices.Sort(excluded)
	if !slices.Equal(excluded, exclude) {
		t.Errorf("excluded %v, want %v", excluded, exclude)
	}
}

func verify(replicas, quorum, maxReplicas int) spec.Verify {
	return spec.Verify{Replicas: replicas, Quorum: quorum, MaxReplicas: maxReplicas, Trust: spec.TrustOff}
}

// step is one move of a vote scenario: peer takes a lease, which must be
// of task ("take"); finishes its lease of task with an outcome, and a
// digest when ok; must get no lease right now ("none"); is a worker
// waiting in Next for work ("idle"), that could vote on a disputed task;
// or time passes until idle workers no longer count as voters ("later").
type step struct{ peer, op, task, digest string }

func take(peer, task string) step       { return step{peer, "take", task, ""} }
func ok(peer, task, digest string) step { return step{peer, report.OutcomeOK, task, digest} }
func failed(peer, task string) step     { return step{peer, report.OutcomeTaskError, task, ""} }
func none(peer string) step             { return step{peer, "none", "", ""} }
func idle(peer string) step             { return step{peer, "idle", "", ""} }
func later() step                       { return step{"", "later", "", ""} }

// sweep: peer takes each of tasks, then votes digests[i] on tasks[i].
func sweep(peer string, tasks []string, digests ...string) []step {
	var ss []step
	for _, t := range tasks {
		ss = append(ss, take(peer, t))
	}
	for i, t := range tasks {
		ss = append(ss, ok(peer, t, digests[i]))
	}
	return ss
}

func TestVoting(t *testing.T) {
	t012, t123 := []string{"t0", "t1", "t2"}, []string{"t1", "t2", "t3"}
	for _, c := range []struct {
		name     string
		verify   spec.Verify
		tasks    int
		maxFails int
		steps    []step
		state    []string // per task
		verdict  []string // substrings, per task
		placed   map[string]string
		exclude  []string
		retries  []string
	}{
		{
			name: "no verification: first result wins", verify: verify(1, 1, 1), tasks: 1,
			steps:  []step{take("a", "t0"), ok("a", "t0", "d1")},
			state:  []string{report.TaskDone},
			placed: map[string]string{"t0": "stage-a-1"},
		},
		{
			name: "two replicas agree", verify: verify(2, 2, 2), tasks: 1,
			steps:   []step{take("a", "t0"), none("a"), take("b", "t0"), ok("b", "t0", "d1"), ok("a", "t0", "d1")},
			state:   []string{report.TaskDone},
			verdict: []string{"accepted: 2 of 2 votes agree"},
			placed:  map[string]string{"t0": "stage-a-1"},
		},
		{
			name: "disagreement escalates to a third replica", verify: verify(2, 2, 3), tasks: 1,
			steps: []step{
				idle("c"), take("a", "t0"), take("b", "t0"), none("c"),
				ok("a", "t0", "d1"), ok("b", "t0", "bad"), take("c", "t0"), ok("c", "t0", "d1"),
			},
			state:   []string{report.TaskDone},
			verdict: []string{"accepted: 2 of 3 votes agree"},
			placed:  map[string]string{"t0": "stage-a-1"},
		},
		{
			name: "disagreement at the cap: no quorum", verify: verify(2, 2, 2), tasks: 1,
			steps:   []step{idle("c"), take("a", "t0"), take("b", "t0"), ok("a", "t0", "d1"), ok("b", "t0", "d2"), none("c")},
			state:   []string{report.TaskFailed},
			verdict: []string{voteText("a", "d1", "b", "d2")},
			placed:  map[string]string{},
		},
		{
			name: "disagreement and nobody else to ask: no quorum", verify: verify(2, 2, 5), tasks: 1,
			steps:   []step{take("a", "t0"), take("b", "t0"), ok("a", "t0", "d1"), ok("b", "t0", "d2")},
			state:   []string{report.TaskFailed},
			verdict: []string{voteText("a", "d1", "b", "d2")},
		},
		{
			name: "a failed replica is retried, the vote still forms", verify: verify(2, 2, 2), tasks: 1, maxFails: 1,
			steps: []step{
				take("a", "t0"), take("b", "t0"), failed("b", "t0"),
				take("c", "t0"), ok("a", "t0", "d1"), ok("c", "t0", "d1"),
			},
			state:   []string{report.TaskDone},
			verdict: []string{"accepted: 2 of 2 votes agree"},
			retries: []string{"t0 task_error"},
		},
		{
			name: "a replica failing past its retries leaves the vote to the others", verify: verify(2, 1, 2), tasks: 1,
			steps:   []step{take("a", "t0"), take("b", "t0"), failed("b", "t0"), ok("a", "t0", "d1")},
			state:   []string{report.TaskDone},
			verdict: []string{"accepted: 1 of 1 votes agree"},
		},
		{
			name: "a liar loses three votes and is excluded", verify: verify(2, 2, 3), tasks: 3,
			steps: slices.Concat(
				[]step{idle("c"), take("a", "t0"), take("a", "t1"), take("a", "t2")},
				sweep("liar", t012, "x", "x", "x"),
				[]step{ok("a", "t0", "d0"), ok("a", "t1", "d1"), ok("a", "t2", "d2")},
				sweep("c", t012, "d0", "d1", "d2"),
				[]step{none("liar")},
			),
			state:   []string{report.TaskDone, report.TaskDone, report.TaskDone},
			verdict: []string{"accepted: 2 of 3", "accepted: 2 of 3", "accepted: 2 of 3"},
			exclude: []string{"liar"},
		},
		{
			name: "an excluded peer's accepted task is verified again", verify: verify(2, 2, 4), tasks: 4,
			steps: slices.Concat(
				// t0: the liar and its accomplice b agree and win.
				[]step{take("liar", "t0"), take("b", "t0"), ok("liar", "t0", "x"), ok("b", "t0", "x")},
				// b goes quiet; the liar loses three votes against a and c.
				[]step{later(), idle("c")},
				[]step{take("a", "t1"), take("a", "t2"), take("a", "t3")},
				sweep("liar", t123, "x", "x", "x"),
				[]step{ok("a", "t1", "d1"), ok("a", "t2", "d2"), ok("a", "t3", "d3")},
				sweep("c", t123, "d1", "d2", "d3"),
				// t0 is reopened: a and c outvote b.
				sweep("a", []string{"t0"}, "good"), sweep("c", []string{"t0"}, "good"),
			),
			state:   []string{report.TaskDone, report.TaskDone, report.TaskDone, report.TaskDone},
			verdict: []string{"accepted: 2 of 3 votes agree"},
			// a and c ran digest-only replicas: the winner is fetched.
			placed:  map[string]string{"t0": "fetched-t0"},
			exclude: []string{"liar"},
			retries: []string{"t0 reopened"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.tasks, Config{Verify: c.verify, Retries: c.maxFails})
			for i, s := range c.steps {
				switch s.op {
				case "take":
					if l := f.take(t, s.peer); l.TaskID != s.task {
						t.Fatalf("step %d: %s got a lease of %s, want %s", i, s.peer, l.TaskID, s.task)
					}
				case "idle":
					f.idle(s.peer)
				case "later":
					f.clock.advance(VoterIdle + time.Second)
				case "none":
					if l := f.q.TryNext(s.peer); l != nil {
						t.Fatalf("step %d: %s got a lease of %s, want none", i, s.peer, l.TaskID)
					}
				default:
					f.finish(s.peer, s.task, s.op, s.digest)
				}
			}
			settled := true
			for _, st := range c.state {
				settled = settled && (st == report.TaskDone || st == report.TaskFailed)
			}
			if settled {
				f.waitDone(t) // an output fetch runs on a goroutine of its own
			}
			f.expect(t, c.state, c.verdict, c.placed, c.exclude)
			if !slices.Equal(f.env.retries, c.retries) {
				t.Errorf("retries %v, want %v", f.env.retries, c.retries)
			}
		})
	}
}

// TestRevokedLeaseOfDecidedTask: a peer's lost session revokes its leases
// without the queue's lock before settling them; a replica's win in
// between revokes the task's other copies too. The lease must be revoked
// once (a double close panicked the coordinator under load) and settled
// once.
func TestRevokedLeaseOfDecidedTask(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(3, 2, 3)})
	for _, p := range []string{"a", "b", "c"} {
		f.take(t, p)
	}
	lost := f.leases["c/t0"]
	revoke(lost) // settlePeer's first step, for peer c
	f.finish("a", "t0", report.OutcomeOK, "d1")
	f.finish("b", "t0", report.OutcomeOK, "d1") // accepted: c's copy is revoked again
	f.waitDone(t)
	if f.q.Finish(lost, Result{Outcome: report.OutcomeLost, Err: errors.New("peer c went away")}) {
		t.Error("the revoked copy's late loss was taken as a result")
	}
	f.expect(t, []string{report.TaskDone}, nil, nil, nil)
	canceled := 0
	for _, a := range f.rep.Tasks[0].Attempts {
		if a.Outcome == report.OutcomeCanceled {
			canceled++
		}
	}
	if n := len(f.rep.Tasks[0].Attempts); n != 3 || canceled != 1 {
		t.Errorf("%d attempts (%d canceled), want 3 with c's canceled once: %+v", n, canceled, f.rep.Tasks[0].Attempts)
	}
}

// TestInlineVotes: an output held in memory counts as held: the winning
// replica's inline data is placed, a losing replica's is dropped without
// a Discard (there is no folder).
func TestInlineVotes(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(2, 2, 3)})
	a, b := f.take(t, "a"), f.take(t, "b")
	if f.q.Finish(a, Result{Outcome: report.OutcomeOK, Digest: dg("x"), Inline: true, Data: []byte("from a"), Files: []string{"data"}}) {
		t.Fatal("accepted on one vote of two")
	}
	if !f.q.Finish(b, Result{Outcome: report.OutcomeOK, Digest: dg("x"), Inline: true, Data: []byte("from b"), Files: []string{"data"}}) {
		t.Fatal("two matching inline votes not accepted")
	}
	if got := f.env.placed["t0"]; got != "inline:from a" {
		t.Errorf("placed %q, want the first inline vote", got)
	}
	if len(f.env.discarded) != 0 {
		t.Errorf("discarded %v: inline outputs have no folder", f.env.discarded)
	}
	if got := f.rep.Tasks[0].Files; !slices.Equal(got, []string{"tasks/t0/data"}) {
		t.Errorf("files %v", got)
	}
}

// checkPending: the pending list holds exactly the tasks that need more
// replicas, each once (what unqueueLocked and requeueLocked rely on).
func checkPending(t *testing.T, f *fixture, step string) {
	t.Helper()
	f.q.mu.Lock()
	defer f.q.mu.Unlock()
	in := map[int]bool{}
	for _, task := range f.q.pending {
		if in[task] {
			t.Fatalf("%s: task %d twice in pending %v", step, task, f.q.pending)
		}
		in[task] = true
	}
	for task, ts := range f.q.tasks {
		if (ts.need > 0) != in[task] {
			t.Fatalf("%s: task %d needs %d, in pending %v", step, task, ts.need, in[task])
		}
	}
}

// The pending list stays the tasks with need > 0 through leases, results
// of every kind, disagreeing votes, retries and a lost peer.
func TestPendingInvariant(t *testing.T) {
	f := newFixture(t, 12, Config{Verify: verify(2, 2, 3), Retries: 1})
	digests := map[string]string{"a": "x", "b": "x", "c": "y"}
	for round := 0; ; round++ {
		if all, _ := f.q.Done(); all || round > 50 {
			break
		}
		var leased []*Lease
		for _, p := range []string{"a", "b", "c"} {
			for len(leased) < 3*(round+1) {
				l := f.q.TryNext(p)
				if l == nil {
					break
				}
				f.leases[p+"/"+l.TaskID] = l
				leased = append(leased, l)
				checkPending(t, f, fmt.Sprintf("round %d: lease %s to %s", round, l.TaskID, p))
			}
		}
		for i, l := range leased {
			outcome := report.OutcomeOK
			switch {
			case round == 1 && l.Peer == "c":
				f.q.Lose("c", errors.New("gone"))
				checkPending(t, f, fmt.Sprintf("round %d: c lost", round))
				continue
			case i%5 == 3:
				outcome = report.OutcomeTaskError
			}
			f.finish(l.Peer, l.TaskID, outcome, digests[l.Peer])
			checkPending(t, f, fmt.Sprintf("round %d: %s of %s by %s", round, outcome, l.TaskID, l.Peer))
		}
	}
	f.waitDone(t)
	checkPending(t, f, "the end")
}
