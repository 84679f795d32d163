package sched

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// record writes decisions as a journal would, one JSON record a line.
func record(t testing.TB, ds []Decision) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, d := range ds {
		line, err := json.Marshal(d.Record())
		if err != nil {
			t.Fatalf("encode %s: %v", d, err)
		}
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

// readBack decodes what record wrote.
func readBack(t testing.TB, journal []byte) []Decision {
	t.Helper()
	var ds []Decision
	sc := bufio.NewScanner(bytes.NewReader(journal))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("journal line %d: %v", n, err)
		}
		d, err := r.Decision()
		if err != nil {
			t.Fatalf("journal line %d: %v", n, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// replayed checks that what the queue decided, journaled and read back,
// replays into a fresh report of the same tasks as the queue's own report
// (Replay): every test of the fixture checks it when it ends.
func (f *fixture) replayed(t testing.TB) {
	t.Helper()
	if f.env.underLock.Load() {
		t.Error("a decision was applied with the queue's lock held")
	}
	if t.Failed() {
		return
	}
	f.env.mu.Lock()
	ds := slices.Clone(f.env.decisions)
	f.env.mu.Unlock()
	fresh := freshReport(len(f.rep.Tasks))
	if err := Replay(fresh, readBack(t, record(t, ds))); err != nil {
		t.Fatal(err)
	}
	if diff := replayDiff(f.rep, fresh); diff != "" {
		t.Errorf("the replayed decisions give another report:\n%s", diff)
	}
}

// freshReport is the report of n tasks t0..t(n-1) as the fixture starts.
func freshReport(n int) *report.Report {
	rep := &report.Report{Tasks: make([]report.Task, n)}
	for i := range rep.Tasks {
		rep.Tasks[i] = report.Task{ID: fmt.Sprintf("t%d", i), State: report.TaskPending}
	}
	return rep
}

// replayDiff says where two reports differ in what Replay gives.
func replayDiff(want, got *report.Report) string {
	var b bytes.Buffer
	for i := range want.Tasks {
		w, g := replayed(want.Tasks[i]), replayed(got.Tasks[i])
		if w != g {
			fmt.Fprintf(&b, "task %d:\n  live   %s\n  replay %s\n", i, w, g)
		}
	}
	if w, g := fmt.Sprint(want.Summary.Done, want.Summary.Failed), fmt.Sprint(got.Summary.Done, got.Summary.Failed); w != g {
		fmt.Fprintf(&b, "summary done, failed: live %s, replay %s\n", w, g)
	}
	if w, g := exclusions(want), exclusions(got); w != g {
		fmt.Fprintf(&b, "excluded: live %s, replay %s\n", w, g)
	}
	return b.String()
}

// replayed is what Replay gives of a task's record, as JSON.
func replayed(t report.Task) string {
	r := report.Task{ID: t.ID, State: t.State, Peer: t.Peer, Digest: t.Digest, Files: t.Files, Error: t.Error, Attempts: t.Attempts}
	b, _ := json.Marshal(r)
	return string(b)
}

func exclusions(rep *report.Report) string {
	b, _ := json.Marshal(rep.Excluded)
	return string(b)
}

// TestReplayGivesTheSameReport runs a verified, spot-checked job through
// retries, a lost lease, a dispute, a caught liar, a reopened task and a
// failed one; its decisions, journaled and read back, replay into a fresh
// report that matches the queue's own. (Every test of the fixture checks
// the same when it ends; this one checks that the check can fail.)
func TestReplayGivesTheSameReport(t *testing.T) {
	f := newFixture(t, 3, Config{Verify: spotVerify(2, 2, 1), Retries: 1, Self: "me"})
	for _, p := range []string{"a", "b", "c", "d", "e", "me"} {
		f.idle(p)
	}
	// t0: a and b agree, then the submitter's check disagrees: both lied.
	f.take(t, "a")
	f.take(t, "b")
	f.finish("a", "t0", report.OutcomeOK, "x")
	f.finish("b", "t0", report.OutcomeOK, "x")
	l := f.check(t, "t0")
	f.q.Finish(l, Result{Outcome: report.OutcomeOK, Digest: dg("y"), Stage: "stage-me", Files: []string{"data"}, End: f.clock.Now()})
	// t1 and t2: task errors of c and d, then a lost lease of e.
	for _, p := range []string{"c", "d", "c", "d"} {
		l := f.take(t, p)
		f.finish(p, l.TaskID, report.OutcomeTaskError, "")
	}
	f.take(t, "e")
	f.q.Lose("e", errors.New("gone"))
	f.q.Close()

	f.env.mu.Lock()
	ds := slices.Clone(f.env.decisions)
	f.env.mu.Unlock()
	kinds := map[string]bool{}
	for _, d := range ds {
		kinds[d.Record().Kind] = true
	}
	for _, k := range []string{KindLease, KindSettle, KindAccept, KindPlaced, KindDone, KindExclude} {
		if !kinds[k] {
			t.Errorf("no %q decision in %d", k, len(ds))
		}
	}
	if len(f.rep.Excluded) == 0 || f.rep.Tasks[0].Digest != dg("y").String() {
		t.Fatalf("scenario: excluded %v, t0 %+v", f.rep.Excluded, f.rep.Tasks[0])
	}

	fresh := freshReport(3)
	if err := Replay(fresh, readBack(t, record(t, ds))); err != nil {
		t.Fatal(err)
	}
	if diff := replayDiff(f.rep, fresh); diff != "" {
		t.Fatalf("the replayed decisions give another report:\n%s", diff)
	}
	// Without the Exclude decisions the replay differs: the check can fail.
	fresh = freshReport(3)
	ds = slices.DeleteFunc(ds, func(d Decision) bool { _, ok := d.(Exclude); return ok })
	if err := Replay(fresh, ds); err != nil {
		t.Fatal(err)
	}
	if replayDiff(f.rep, fresh) == "" {
		t.Error("a replay without the exclusions gives the same report")
	}
}
