package sched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestPrefetchTakesPendingInOrder(t *testing.T) {
	f := newFixture(t, 3, Config{Verify: verify(1, 1, 1)})
	var got []string
	for l := f.q.TryNext("a"); l != nil; l = f.q.TryNext("a") {
		got = append(got, l.TaskID)
		if l.Attempt != 0 || l.DigestOnly || l.Peer != "a" {
			t.Errorf("lease %+v: want attempt 0 of peer a, uploading", l)
		}
	}
	if want := []string{"t0", "t1", "t2"}; !slices.Equal(got, want) {
		t.Errorf("prefetched %v, want %v", got, want)
	}
	for i, rt := range f.rep.Tasks {
		if rt.State != report.TaskRunning {
			t.Errorf("task %d is %s, want running", i, rt.State)
		}
	}
}

func TestLeaseLifecycle(t *testing.T) {
	for _, c := range []struct {
		name string
		// act settles lease l of task t0 (of one task, retries 1) and
		// returns the outcome expected of its recorded attempt.
		act         func(f *fixture, l *Lease) string
		state       string // of t0 afterwards
		retries     int    // TaskRetry events
		requeued    bool   // another worker gets t0
		attemptNext int    // the next lease's attempt number
	}{
		{"ok", func(f *fixture, l *Lease) string { f.finish("a", "t0", report.OutcomeOK, "d"); return report.OutcomeOK },
			report.TaskDone, 0, false, 0},
		{"task error is retried", func(f *fixture, l *Lease) string {
			f.finish("a", "t0", report.OutcomeTaskError, "")
			return report.OutcomeTaskError
		}, report.TaskPending, 1, true, 1},
		{"lost peer: requeued without a retry", func(f *fixture, l *Lease) string {
			if n := f.q.Lose("a", errors.New("gone")); n != 1 {
				panic("Lose took no lease")
			}
			return report.OutcomeLost
		}, report.TaskPending, 0, true, 1},
		{"expired lease: requeued without a retry", func(f *fixture, l *Lease) string {
			f.q.Expire(time.Minute) // not yet
			if closed(l.Revoked()) {
				panic("revoked before its time")
			}
			f.clock.advance(time.Minute + time.Second)
			f.q.Expire(time.Minute)
			return report.OutcomeLost
		}, report.TaskPending, 0, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 1, Config{Verify: verify(1, 1, 1), Retries: 1})
			l := f.take(t, "a")
			want := c.act(f, l)
			if !closed(l.Revoked()) {
				t.Error("settled lease not revoked")
			}
			rt := f.rep.Tasks[0]
			if len(rt.Attempts) != 1 || rt.Attempts[0].Outcome != want || rt.Attempts[0].Peer != "a" {
				t.Errorf("attempts %+v, want one %s of a", rt.Attempts, want)
			}
			if rt.State != c.state {
				t.Errorf("state %s, want %s", rt.State, c.state)
			}
			if len(f.env.retries) != c.retries {
				t.Errorf("retry events %v, want %d", f.env.retries, c.retries)
			}
			l2 := f.q.TryNext("b")
			if (l2 != nil) != c.requeued {
				t.Fatalf("requeued: got lease %v, want %v", l2, c.requeued)
			}
			if l2 != nil && l2.Attempt != c.attemptNext {
				t.Errorf("next attempt %d, want %d", l2.Attempt, c.attemptNext)
			}
			// A second settlement of the same lease changes nothing.
			if f.q.Finish(l, Result{Outcome: report.OutcomeOK, Stage: "late"}) {
				t.Error("a settled lease was accepted again")
			}
			if len(f.rep.Tasks[0].Attempts) != 1 {
				t.Errorf("late result recorded: %+v", f.rep.Tasks[0].Attempts)
			}
			if f.env.discarded[len(f.env.discarded)-1] != "late" {
				t.Errorf("late stage not discarded: %v", f.env.discarded)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(1, 1, 1), Retries: 1})
	f.take(t, "a")
	f.finish("a", "t0", report.OutcomeCrashed, "")
	f.take(t, "a")
	f.finish("a", "t0", report.OutcomeTimeout, "")
	if all, failed := f.q.Done(); !all || failed != 1 {
		t.Fatalf("Done = %v, %d; want true, 1", all, failed)
	}
	if rt := f.rep.Tasks[0]; rt.State != report.TaskFailed || f.rep.Summary.Failed != 1 || f.env.done["t0"] {
		t.Errorf("task %+v, summary %+v, done event %v", rt, f.rep.Summary, f.env.done)
	}
	if _, err := f.q.Next(t.Context(), "a"); !errors.Is(err, ErrDrained) {
		t.Errorf("Next after the end: %v, want ErrDrained", err)
	}
}

func TestBackupCopyOfTheSlowestTask(t *testing.T) {
	f := newFixture(t, 2, Config{Verify: verify(1, 1, 1)})
	slow := f.take(t, "a")
	f.take(t, "b")
	f.finish("b", "t1", report.OutcomeOK, "d1") // takes a second: the median
	if l := f.q.TryNext("c"); l != nil {
		t.Fatalf("backup of %s before the task ran long", l.TaskID)
	}
	f.clock.advance(3 * time.Second)
	if l := f.q.TryNext("a"); l != nil {
		t.Fatal("a got a backup of its own task")
	}
	backup := f.take(t, "c")
	if backup.TaskID != "t0" || backup.Attempt != 1 {
		t.Fatalf("backup lease %+v, want attempt 1 of t0", backup)
	}
	if l := f.q.TryNext("d"); l != nil {
		t.Fatal("a third copy of t0")
	}
	if !f.finish("c", "t0", report.OutcomeOK, "d0") {
		t.Fatal("the backup's result was not accepted")
	}
	if !closed(slow.Revoked()) {
		t.Error("the slow copy was not revoked")
	}
	at := f.rep.Tasks[0].Attempts
	if len(at) != 2 || at[1].Peer != "a" || at[1].Outcome != report.OutcomeCanceled {
		t.Errorf("attempts %+v: want c's ok, then a's canceled", at)
	}
	if f.env.placed["t0"] != "stage-c-3" {
		t.Errorf("placed %v", f.env.placed)
	}
	// The slow copy's late result is dropped.
	f.finish("a", "t0", report.OutcomeOK, "d0")
	if len(f.rep.Tasks[0].Attempts) != 2 {
		t.Errorf("late result recorded: %+v", f.rep.Tasks[0].Attempts)
	}
}

func TestMinPeersHoldsLeases(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(1, 1, 1), MinPeers: 2})
	if l := f.q.TryNext("a"); l != nil {
		t.Fatal("lease before enough peers enrolled")
	}
	f.q.Enrol("a", "")
	f.q.Enrol("a", "")
	if l := f.q.TryNext("a"); l != nil {
		t.Fatal("one peer enrolled twice counts as two")
	}
	f.q.Enrol("b", "")
	if l := f.q.TryNext("a"); l == nil {
		t.Fatal("no lease after two peers enrolled")
	}
}

func TestCloseEndsWaitsAndRevokes(t *testing.T) {
	f := newFixture(t, 2, Config{Verify: verify(1, 1, 1)})
	l := f.take(t, "a")
	f.take(t, "a")
	errc := make(chan error, 1)
	go func() {
		_, err := f.q.Next(context.Background(), "b")
		errc <- err
	}()
	f.q.Close()
	if err := <-errc; !errors.Is(err, ErrDrained) {
		t.Errorf("a waiting Next ended with %v, want ErrDrained", err)
	}
	if !closed(l.Revoked()) {
		t.Error("running lease not revoked at close")
	}
}

func TestNextEndsWithContext(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(1, 1, 1)})
	f.take(t, "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.q.Next(ctx, "b"); !errors.Is(err, context.Canceled) {
		t.Errorf("Next = %v, want context.Canceled", err)
	}
}

func TestAloneCollapsesReplicas(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(3, 2, 5), Alone: true})
	f.take(t, "me")
	if l := f.q.TryNext("other"); l != nil {
		t.Fatal("a replica was leased with no peers")
	}
	if !f.finish("me", "t0", report.OutcomeOK, "d") {
		t.Fatal("not accepted on one vote")
	}
	if len(f.rep.Warnings) != 1 || f.q.Verifying() {
		t.Errorf("warnings %q, verifying %v", f.rep.Warnings, f.q.Verifying())
	}
}

func TestRejectedOutputsExcludeThePeer(t *testing.T) {
	f := newFixture(t, 3, Config{Verify: verify(1, 1, 1), Verifier: true, Retries: 1})
	for i := range 3 {
		l := f.take(t, "bad")
		f.q.Finish(l, Result{Outcome: report.OutcomeRejected, Err: errors.New("rejected")})
		if i < 2 && len(f.rep.Excluded) != 0 {
			t.Fatalf("excluded after %d rejections", i+1)
		}
	}
	if len(f.rep.Excluded) != 1 || f.rep.Excluded[0].Peer != "bad" {
		t.Fatalf("excluded %+v", f.rep.Excluded)
	}
	if _, err := f.q.Next(t.Context(), "bad"); !errors.Is(err, ErrExcluded) {
		t.Errorf("Next of an excluded peer: %v", err)
	}
	// The rejected tasks run again elsewhere.
	for range 3 {
		l := f.take(t, "good")
		f.q.Finish(l, Result{Outcome: report.OutcomeOK, Digest: dg("d"), Stage: "s" + l.TaskID})
	}
	if all, failed := f.q.Done(); !all || failed != 0 {
		t.Errorf("Done = %v, %d", all, failed)
	}
	pr := f.q.PeerReport()
	if len(pr) != 2 || pr[0].Peer != "bad" || !pr[0].Excluded || pr[0].Invalid != 3 || pr[1].Peer != "good" || pr[1].Valid != 3 {
		t.Errorf("peer report %+v", pr)
	}
}

func TestAdaptiveTrust(t *testing.T) {
	for _, c := range []struct {
		name       string
		streak     int
		replicated bool
	}{
		{"a new peer is replicated", 0, true},
		{"short of the threshold", TrustedStreak - 1, true},
		// 1/streak is 1e-6: the seeded draw replicates it only if it is that small.
		{"a trusted peer is not", 1000000, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, file := adaptiveFixture(t, 2, map[string]savedTrust{"a": {Streak: c.streak}})
			f.take(t, "a")
			l := f.q.TryNext("b")
			if got := l != nil; got != c.replicated {
				t.Fatalf("replica leased: %v, want %v", got, c.replicated)
			}
			if c.replicated {
				f.leases["b/t0"] = l
				f.finish("b", "t0", report.OutcomeOK, "d")
			}
			f.finish("a", "t0", report.OutcomeOK, "d")
			if all, _ := f.q.Done(); !all {
				t.Fatal("not accepted")
			}
			if trusted := f.rep.Tasks[0].Verdict == "accepted: 1 of 1 votes agree (trusted peer, not replicated)"; trusted == c.replicated {
				t.Errorf("verdict %q", f.rep.Tasks[0].Verdict)
			}
			f.q.SaveTrust()
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var saved map[string]savedTrust
			if err := json.Unmarshal(data, &saved); err != nil {
				t.Fatal(err)
			}
			if s := saved["a"]; s.Streak != c.streak+1 || s.Valid != 1 || s.Updated.IsZero() {
				t.Errorf("saved trust of a %+v, want streak %d and one valid result", s, c.streak+1)
			}
		})
	}
}

func TestAdaptiveStreakResetsOnALostVote(t *testing.T) {
	f, file := adaptiveFixture(t, 3, map[string]savedTrust{"liar": {Streak: 5, Valid: 5}})
	f.idle("c")
	f.take(t, "a")
	f.take(t, "liar")
	f.finish("a", "t0", report.OutcomeOK, "d")
	f.finish("liar", "t0", report.OutcomeOK, "x")
	f.take(t, "c")
	f.finish("c", "t0", report.OutcomeOK, "d")
	f.waitDone(t)
	f.q.SaveTrust()
	data, _ := os.ReadFile(file)
	var saved map[string]savedTrust
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	if s := saved["liar"]; s.Streak != 0 || s.Valid != 5 || s.Invalid != 1 {
		t.Errorf("liar %+v, want streak 0, 5 valid, 1 invalid", s)
	}
	if s := saved["a"]; s.Streak != 1 || s.Valid != 1 {
		t.Errorf("a %+v, want streak 1", s)
	}
}

func TestFetchFailureAsksForAnotherReplica(t *testing.T) {
	f := newFixture(t, 1, Config{Verify: verify(2, 2, 2)})
	f.env.fetchErr = errors.New("peer gone")
	f.take(t, "a")
	f.take(t, "b")
	f.finish("a", "t0", report.OutcomeCrashed, "") // the uploader fails for good
	f.finish("b", "t0", report.OutcomeOK, "d")
	// b's vote alone is short of the quorum: another replica is asked for.
	l := f.take(t, "c")
	f.finish("c", "t0", report.OutcomeOK, "d")
	if !l.DigestOnly {
		t.Fatal("c's replica uploads")
	}
	// Both voters are digest-only: the first fetch fails, the vote forgets
	// that voter's fetch and tries the other.
	timeout := time.After(5 * time.Second)
	for {
		ch := f.q.Changed()
		f.env.mu.Lock()
		n := len(f.env.fetched)
		f.env.mu.Unlock()
		if n >= 2 {
			break
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("fetches %v", f.env.fetched)
		}
	}
	f.env.mu.Lock()
	f.env.fetchErr = nil
	f.env.mu.Unlock()
	// Neither voter can provide it any more: one more replica runs.
	f.take(t, "d")
	f.finish("d", "t0", report.OutcomeOK, "d")
	f.waitDone(t)
	if f.env.placed["t0"] != "fetched-t0" || f.rep.Tasks[0].State != report.TaskDone {
		t.Errorf("placed %v; task %+v", f.env.placed, f.rep.Tasks[0])
	}
}

// A batched lease waits behind its batch and its worker's queue: it gets
// a backup copy only when its worker has reported nothing for as long as
// a single lease must have run.
func TestBackupCopyOfBatchedLeases(t *testing.T) {
	f := newFixture(t, 7, Config{Verify: verify(1, 1, 1)})
	heard := func(peer string) {
		f.q.mu.Lock()
		f.q.peers.heard[peer] = f.clock.Now()
		f.q.mu.Unlock()
	}
	l0 := f.take(t, "a")
	f.finish("a", l0.TaskID, report.OutcomeOK, "d") // a median of a second
	batch := []*Lease{f.take(t, "a"), f.take(t, "a"), f.take(t, "a")}
	f.q.Batched(batch)
	single := f.take(t, "b")
	f.take(t, "c")
	f.clock.advance(time.Second)
	f.take(t, "c")
	f.clock.advance(2 * time.Second)
	// a reported a result just now: its batch is queued work, not a
	// straggler; b's single lease is one.
	heard("a")
	l := f.q.TryNext("c")
	if l == nil || l.TaskID != single.TaskID {
		t.Fatalf("backup %+v, want one of b's single lease %s", l, single.TaskID)
	}
	if l := f.q.TryNext("c"); l != nil {
		t.Fatalf("backup of %s from a busy worker's batch", l.TaskID)
	}
	// a falls silent for longer than the threshold: stuck.
	f.clock.advance(3 * time.Second)
	if l := f.q.TryNext("c"); l == nil || l.Peer != "c" || !slices.Contains([]string{batch[0].TaskID, batch[1].TaskID, batch[2].TaskID}, l.TaskID) {
		t.Fatalf("backup %+v, want one of a's batch once a is silent", l)
	}
}

// The backup scan waits until a lease may be taken; a task whose copies
// drop to one is a candidate at once, without time passing.
func TestBackupAfterACopyEnds(t *testing.T) {
	f := newFixture(t, 2, Config{Verify: verify(1, 1, 1)})
	f.take(t, "a")
	f.take(t, "b")
	f.finish("b", "t1", report.OutcomeOK, "d1") // a median of a second
	f.clock.advance(3 * time.Second)
	backup := f.take(t, "c")
	if backup.TaskID != "t0" {
		t.Fatalf("backup lease %+v, want t0", backup)
	}
	if l := f.q.TryNext("d"); l != nil {
		t.Fatal("a third copy of t0")
	}
	// c's copy ends without deciding t0 or requeueing it (no outcome
	// does both in this queue; the rule is the scan's cache).
	f.q.mu.Lock()
	delete(f.q.running, backup.ID)
	f.q.dropCopyLocked(backup.Task)
	f.q.mu.Unlock()
	if l := f.q.TryNext("d"); l == nil || l.TaskID != "t0" {
		t.Fatalf("backup %+v, want t0 once its copy ended", l)
	}
}

// BenchmarkBackupAskOwn: near the end of a job, a worker whose own lease
// ran long asks for work again and again (at every result; it may not
// back up its own task) while 4096 leases run: before this worker's
// second ask it knows the answer without a scan of every running lease.
func BenchmarkBackupAskOwn(b *testing.B) {
	const n = 4096
	f := newFixture(b, n, Config{Verify: verify(1, 1, 1)})
	for range n - 1 {
		if f.q.TryNext("a") == nil {
			b.Fatal("no lease")
		}
	}
	l := f.q.TryNext("b")
	f.leases["b/"+l.TaskID] = l
	f.finish("b", l.TaskID, report.OutcomeOK, "d") // the median: a second
	f.clock.advance(3 * time.Second)
	for b.Loop() {
		if f.q.TryNext("a") != nil {
			b.Fatal("a got a backup of its own task")
		}
	}
}

// TestOnRevoke: a lease's OnRevoke function runs once, when the lease is
// settled or taken back, or at once when it already was.
func TestOnRevoke(t *testing.T) {
	f := newFixture(t, 2, Config{Verify: verify(1, 1, 1)})
	l := f.take(t, "a")
	calls := 0
	l.OnRevoke(func() { calls++ })
	if calls != 0 {
		t.Fatal("called before the lease was revoked")
	}
	f.finish("a", l.TaskID, report.OutcomeOK, "d")
	f.q.Lose("a", errors.New("gone")) // no second call
	if calls != 1 || !closed(l.Revoked()) {
		t.Fatalf("%d calls after the lease was settled (revoked: %v), want 1", calls, closed(l.Revoked()))
	}
	l.OnRevoke(func() { calls++ })
	if calls != 2 {
		t.Fatal("not called at once for a settled lease")
	}

	l2 := f.take(t, "b")
	taken := false
	l2.OnRevoke(func() { taken = true })
	f.q.Lose("b", errors.New("gone"))
	if !taken {
		t.Fatal("not called when the lease was taken back")
	}
}

// BenchmarkLeaseFinish: the queue's own cost per task of a job of one
// replica: a lease taken (TryNext) and its result settled (Finish).
func BenchmarkLeaseFinish(b *testing.B) {
	f := newFixture(b, b.N, Config{Verify: verify(1, 1, 1)})
	res := Result{Outcome: report.OutcomeOK, Digest: dg("d"), Inline: true, Files: []string{"data"}, Data: []byte("x")}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l := f.q.TryNext("a")
		res.End = l.Start.Add(time.Millisecond)
		f.q.Finish(l, res)
	}
}

// Replicas of a task go to peers of distinct hosts unless the job lets
// them share one (verify.distinct_hosts: false).
func TestReplicasOnDistinctHosts(t *testing.T) {
	for _, distinct := range []bool{true, false} {
		t.Run(fmt.Sprint("distinct=", distinct), func(t *testing.T) {
			v := verify(2, 2, 2)
			v.DistinctHosts = distinct
			f := newFixture(t, 1, Config{Verify: v})
			f.q.Enrol("a@1", "10.0.0.1")
			f.q.Enrol("b@2", "10.0.0.1")
			f.q.Enrol("c@3", "10.0.0.2")
			f.take(t, "a@1")
			l := f.q.TryNext("b@2")
			if distinct && l != nil {
				t.Fatalf("b, on a's host, got a replica of %s", l.TaskID)
			}
			if !distinct && l == nil {
				t.Fatal("b got no replica though the job lets replicas share a host")
			}
			if distinct && f.q.TryNext("c@3") == nil {
				t.Fatal("c, on another host, got no replica")
			}
		})
	}
}

// The trust file is keyed by node ID: a streak earned under one name
// holds under another name of the same node (and a file keyed by
// "name@ID", as p2pc wrote it before, is read by its IDs).
func TestTrustFileByNodeID(t *testing.T) {
	f, file := adaptiveFixture(t, 2, map[string]savedTrust{"old@ID1": {Streak: 2 * TrustedStreak}})
	f.take(t, "new@ID1")
	f.finish("new@ID1", "t0", report.OutcomeOK, "d")
	if all, _ := f.q.Done(); !all {
		t.Fatalf("the streak of ID1 did not carry over to its new name: %q", f.rep.Tasks[0].Verdict)
	}
	f.q.SaveTrust()
	data, _ := os.ReadFile(file)
	var saved map[string]savedTrust
	if err := json.Unmarshal(data, &saved); err != nil {
		t.Fatal(err)
	}
	if s, ok := saved["ID1"]; !ok || s.Streak != 2*TrustedStreak+1 || len(saved) != 1 {
		t.Errorf("saved %+v, want ID1 with streak %d", saved, 2*TrustedStreak+1)
	}
}

// adaptiveFixture is a queue of one task under adaptive trust, replicas 2,
// quorum 2 and maxReplicas, whose trust file holds saved.
func adaptiveFixture(t *testing.T, maxReplicas int, saved map[string]savedTrust) (*fixture, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "trust.json")
	data, _ := json.Marshal(saved)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v := verify(2, 2, maxReplicas)
	v.Trust = spec.TrustAdaptive
	return newFixture(t, 1, Config{Verify: v, TrustFile: file}), file
}
