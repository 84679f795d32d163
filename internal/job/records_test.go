package job

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/p2pc/p2pc/internal/jobdb"
	"github.com/p2pc/p2pc/internal/report"
	"github.com/p2pc/p2pc/spec"
)

// TestRecords: a task's record is made from the spec when first asked
// for, leaves memory once a decided task is journaled, and is read back
// from the job database as it was; each gives every task in order,
// whichever of the three places its record is in.
func TestRecords(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	var tasks []spec.Task
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		tasks = append(tasks, spec.Task{ID: id, Params: map[string]any{"n": id}})
	}
	r := &runner{
		p:   &Prepared{OutDir: out, Spec: &spec.Job{Name: "x", Tasks: spec.TaskList(tasks)}},
		log: slog.New(slog.DiscardHandler),
	}
	var err error
	if r.db, err = jobdb.Open(ctx, filepath.Join(out, jobdb.FileName), jobdb.Options{}); err != nil {
		t.Fatal(err)
	}
	defer r.db.Close()
	rs := newRecords(r, len(tasks))
	r.recs = rs

	t0 := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	done := func(i int, peer string) {
		rec := rs.Task(i)
		rec.State, rec.Peer, rec.Digest = report.TaskDone, peer, "d"+rec.ID
		rec.Attempts = append(rec.Attempts, report.Attempt{Peer: peer, Start: t0, End: t0, Outcome: report.OutcomeOK})
		if err := r.db.PutTask(i, rec); err != nil {
			t.Fatal(err)
		}
		rs.journaled(i)
	}
	done(0, "p1")                                        // cold
	rs.Task(1).State = report.TaskRunning                // hot
	done(3, "p2")                                        // cold
	if err := r.db.PutTask(4, rs.fresh(4)); err != nil { // fresh, journaled as pending
		t.Fatal(err)
	}
	if rs.kind[0] != recCold || rs.kind[1] != recHot || rs.kind[2] != recFresh || rs.kind[3] != recCold || rs.kind[4] != recFresh {
		t.Fatalf("kinds %v", rs.kind)
	}
	if len(rs.hot) != 1 {
		t.Errorf("%d records in memory, want 1 (the running task's)", len(rs.hot))
	}

	ro := func() *jobdb.DB {
		if err := r.db.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		db, err := jobdb.OpenReadOnly(ctx, r.db.Path())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}()
	want := []struct{ id, state, peer string }{
		{"a", report.TaskDone, "p1"}, {"b", report.TaskRunning, ""}, {"c", report.TaskPending, ""},
		{"d", report.TaskDone, "p2"}, {"e", report.TaskPending, ""},
	}
	n := 0
	if err := rs.each(ctx, ro, func(i int, rec *report.Task) error {
		if i != n || rec.ID != want[i].id || rec.State != want[i].state || rec.Peer != want[i].peer || string(rec.Params) == "" {
			t.Errorf("task %d: got %d %+v, want %+v", n, i, rec, want[n])
		}
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(want) {
		t.Fatalf("each gave %d tasks, want %d", n, len(want))
	}

	// A cold record asked for again comes back as it was journaled.
	back := rs.Task(3)
	if back.ID != "d" || back.State != report.TaskDone || back.Digest != "dd" || len(back.Attempts) != 1 || !back.Attempts[0].End.Equal(t0) {
		t.Fatalf("read back %+v", back)
	}
	if rs.kind[3] != recHot {
		t.Errorf("a record read back is not in memory: kind %d", rs.kind[3])
	}
}
