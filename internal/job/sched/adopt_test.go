package sched

import (
	"errors"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
)

// TestAdopt: a handed-over result becomes a lease of its peer (an attempt
// with its real start, one vote) for a task the run has not decided, and
// is refused otherwise.
func TestAdopt(t *testing.T) {
	type step struct {
		peer, op, task string // op: take, ok (finish ok), adopt, refused (adopt gives nil)
	}
	cases := []struct {
		name     string
		replicas int
		steps    []step
		// state of t0 at the end, and how many attempts it has
		state    string
		attempts int
	}{
		{"pending task taken over, never leased again", 1,
			[]step{{"a", "adopt", "t0"}, {"a", "ok", "t0"}, {"b", "take", "t1"}}, report.TaskDone, 1},
		{"decided task refused", 1,
			[]step{{"b", "take", "t0"}, {"b", "ok", "t0"}, {"a", "refused", "t0"}}, report.TaskDone, 1},
		{"unknown task refused", 1,
			[]step{{"a", "refused", "nope"}, {"b", "take", "t0"}, {"b", "ok", "t0"}}, report.TaskDone, 1},
		{"running elsewhere: a backup copy that wins", 1,
			[]step{{"b", "take", "t0"}, {"a", "adopt", "t0"}, {"a", "ok", "t0"}}, report.TaskDone, 2},
		{"verified: one vote of two", 2,
			[]step{{"a", "adopt", "t0"}, {"a", "ok", "t0"}, {"b", "take", "t0"}, {"b", "ok", "t0"}}, report.TaskDone, 2},
		{"verified: the same peer votes once", 2,
			[]step{{"a", "adopt", "t0"}, {"a", "ok", "t0"}, {"a", "refused", "t0"}}, report.TaskRunning, 1},
		{"verified: every replica running, refused", 2,
			[]step{{"b", "take", "t0"}, {"c", "take", "t0"}, {"a", "refused", "t0"}}, report.TaskRunning, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 2, Config{Verify: verify(c.replicas, c.replicas, c.replicas)})
			start := f.clock.Now().Add(-time.Minute)
			for _, s := range c.steps {
				switch s.op {
				case "take":
					if l := f.take(t, s.peer); l.TaskID != s.task {
						t.Fatalf("%s took %s, want %s", s.peer, l.TaskID, s.task)
					}
				case "adopt", "refused":
					l := f.q.Adopt(s.peer, s.task, start)
					if (l == nil) != (s.op == "refused") {
						t.Fatalf("Adopt(%s, %s) = %v, want %s", s.peer, s.task, l, s.op)
					}
					if l != nil {
						if !l.Start.Equal(start) {
							t.Fatalf("adopted lease starts %s, want the attempt's real start %s", l.Start, start)
						}
						f.leases[s.peer+"/"+s.task] = l
					}
				case "ok":
					f.finish(s.peer, s.task, report.OutcomeOK, "d")
				}
			}
			rt := f.rep.Tasks[0]
			if rt.State != c.state || len(rt.Attempts) != c.attempts {
				t.Fatalf("t0: state %s with %d attempts, want %s with %d: %+v", rt.State, len(rt.Attempts), c.state, c.attempts, rt.Attempts)
			}
			for _, a := range rt.Attempts {
				if a.Peer == "a" && !a.Start.Equal(start) {
					t.Errorf("a's attempt starts %s, want %s", a.Start, start)
				}
			}
		})
	}
}

// TestAdoptedLeaseIsNotOld: a handed-over attempt that started long ago
// is not expired, nor copied as a straggler, for the time it ran before.
func TestAdoptedLeaseIsNotOld(t *testing.T) {
	f := newFixture(t, 2, Config{})
	l := f.q.Adopt("a", "t0", f.clock.Now().Add(-time.Hour))
	if l == nil {
		t.Fatal("not adopted")
	}
	f.q.Expire(time.Minute)
	if closed(l.Revoked()) {
		t.Fatal("the adopted lease expired at once")
	}
	f.q.mu.Lock()
	f.q.backup.durations = []time.Duration{time.Millisecond}
	_, backup := f.q.backupCandidateLocked("b")
	f.q.mu.Unlock()
	if backup {
		t.Fatal("the adopted lease is a straggler to copy at once")
	}
	f.clock.advance(2 * time.Minute)
	f.q.Expire(time.Minute)
	if !closed(l.Revoked()) {
		t.Fatal("the adopted lease never expires")
	}
}

// TestAdoptRunningIsNotCopied: a task its peer still runs for an earlier
// session of the job (announced, handed over when it ends) is held for
// that peer: neither leased to another worker nor copied as a straggler,
// however long it runs; its hand-over settles it, and a peer's lost
// session gives it back to the queue.
func TestAdoptRunningIsNotCopied(t *testing.T) {
	f := newFixture(t, 2, Config{})
	held := f.q.AdoptRunning("a", "t0", f.clock.Now())
	if held == nil {
		t.Fatal("not adopted")
	}
	f.take(t, "b")
	f.finish("b", "t1", report.OutcomeOK, "d1")
	f.clock.advance(30 * time.Second) // far past twice the median
	if l := f.q.TryNext("c"); l != nil {
		t.Fatalf("leased %s (attempt %d) while its peer runs it", l.TaskID, l.Attempt)
	}
	f.q.Lose("a", errors.New("gone"))
	if l := f.q.TryNext("c"); l == nil || l.TaskID != "t0" {
		t.Fatalf("after the peer's session was lost: %v, want t0", l)
	}
}

// TestHold: no lease goes out while a hold lasts.
func TestHold(t *testing.T) {
	f := newFixture(t, 2, Config{})
	release := f.q.Hold()
	if l := f.q.TryNext("a"); l != nil {
		t.Fatalf("leased %s during a hold", l.TaskID)
	}
	got := make(chan *Lease, 1)
	go func() {
		l, _ := f.q.Next(t.Context(), "a")
		got <- l
	}()
	release()
	release() // a second call does nothing
	if l := <-got; l == nil || l.TaskID != "t0" {
		t.Fatalf("after the hold: %v", l)
	}
	f.q.mu.Lock()
	holds := f.q.holds
	f.q.mu.Unlock()
	if holds != 0 {
		t.Fatalf("holds %d after release", holds)
	}
}
