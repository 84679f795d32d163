package jobdb

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/p2pc/p2pc/internal/report"
)

// TestRebase: a rebase keeps the tasks asked for, renumbered with their
// attempts, votes, partial results, inline outputs and keys, drops every
// other task's rows and the shared state, and names the new job; a run
// then marks the kept done tasks reused.
func TestRebase(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	db := open(t, path)
	want := sampleReport()
	want.Run = "r1"
	want.Tasks = append(want.Tasks, want.Tasks[0])
	want.Tasks[3].ID = "d"
	for i := range want.Tasks {
		want.Tasks[i].Key[0] = byte(i + 1)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.PutJob(want))
	for i := range want.Tasks {
		must(db.PutTask(i, &want.Tasks[i]))
	}
	must(db.PutOutput(0, "data", []byte("of a")))
	must(db.PutOutput(3, "data", []byte("of d")))
	must(db.PutJobValue(SessionsKey, `["p@x"]`))
	must(db.PutVCGlobal("g", 1, []byte("v")))
	must(db.Flush(ctx))
	if shared, err := db.SharedState(ctx); err != nil || !shared {
		t.Fatalf("SharedState with a global: %v, %v", shared, err)
	}
	must(db.Close())

	// d goes to 0, a to 1; b and c go.
	must(Rebase(ctx, path, "new", map[int]int{3: 0, 0: 1}, Options{Version: "test"}))
	ro, err := OpenReadOnly(ctx, path)
	must(err)
	got, err := ro.Load(ctx)
	must(err)
	var outs []Output
	must(ro.Outputs(ctx, func(o Output) error { outs = append(outs, o); return nil }))
	shared, err := ro.SharedState(ctx)
	must(err)
	sessions, err := ro.JobValue(ctx, SessionsKey)
	must(err)
	ro.Close()
	if got.JobID != "new" || got.Run != "" || sessions != "" || shared {
		t.Errorf("job %q, run %q, sessions %q, shared state %v: want new, none, none, none", got.JobID, got.Run, sessions, shared)
	}
	if len(got.Tasks) != 2 || got.Tasks[0].ID != "d" || got.Tasks[1].ID != "a" {
		t.Fatalf("tasks after the rebase: %+v", got.Tasks)
	}
	for i, old := range []int{3, 0} {
		g, w := got.Tasks[i], want.Tasks[old]
		if g.Key != w.Key || len(g.Attempts) != 1 || len(g.Votes) != 2 || len(g.Partials) != 2 || g.Reused {
			t.Errorf("task %s: key %x, %d attempts, %d votes, %d partials, reused %v", g.ID, g.Key[:2], len(g.Attempts), len(g.Votes), len(g.Partials), g.Reused)
		}
	}
	if len(outs) != 2 || outs[0].TaskID != "d" || string(outs[0].Data) != "of d" || outs[1].TaskID != "a" || string(outs[1].Data) != "of a" {
		t.Errorf("inline outputs after the rebase: %+v", outs)
	}

	// A run's start marks the done tasks reused; a task it writes takes
	// its record's mark.
	db = open(t, path)
	must(db.MarkReused())
	fresh := report.Task{ID: "a", State: report.TaskPending, Attempts: []report.Attempt{}}
	must(db.PutTask(1, &fresh))
	must(db.Close())
	ro, err = OpenReadOnly(ctx, path)
	must(err)
	defer ro.Close()
	head, err := ro.Head(ctx)
	must(err)
	got, err = ro.Load(ctx)
	must(err)
	if !got.Tasks[0].Reused || got.Tasks[1].Reused || head.Summary.Reused != 1 || got.Summary.Reused != 1 {
		t.Errorf("reused: d %v, a %v; summary %d (head) %d (load), want true, false, 1", got.Tasks[0].Reused, got.Tasks[1].Reused, head.Summary.Reused, got.Summary.Reused)
	}
}
